"""The relation half of the temporal rules: assert, close, invalidate, retract.

`RelationRules` is mixed into `versioning.Resolver`, which provides the entity half (`_resolve_ref`, the
current event, the plan being built); the rules themselves are documented there and in
docs/graph-schema.md.
"""

from __future__ import annotations

from typing import Any, TypeVar

from readmodels.graph.identity import content_hash, name_key, relation_key, triple_key
from readmodels.graph.model import (
    EdgeRetraction,
    EntityRef,
    Provenance,
    RelationAssertion,
    RelationInvalidation,
    SpineEvent,
    as_canonical,
)
from readmodels.graph.plan import EdgeDemands, EntityRow, RelationRow, WritePlan

K = TypeVar("K")


def _discard(index: dict[K, dict[int, RelationRow]], key: K, edge: RelationRow) -> None:
    """Drop `edge` from `index[key]`, and the key once empty: a rebuild keeps one index for a whole log."""
    edges = index.get(key)
    if edges is not None:
        edges.pop(id(edge), None)
        if not edges:
            del index[key]


class EdgeIndex:
    """Open edges by entity key, relation key, triple and (session, edge_id)."""

    def __init__(self) -> None:
        self.by_entity: dict[str, dict[int, RelationRow]] = {}
        self.by_key: dict[str, RelationRow] = {}
        self.by_triple: dict[str, dict[int, RelationRow]] = {}
        self.by_edge_id: dict[tuple[str, str], dict[int, RelationRow]] = {}

    def add(self, edge: RelationRow) -> None:
        self.by_entity.setdefault(edge.source_key, {})[id(edge)] = edge
        self.by_entity.setdefault(edge.target_key, {})[id(edge)] = edge
        self.by_key[edge.key] = edge
        self.by_triple.setdefault(edge.triple, {})[id(edge)] = edge
        if edge.edge_id is not None:
            self.by_edge_id.setdefault((edge.session, edge.edge_id), {})[id(edge)] = edge

    def remove(self, edge: RelationRow) -> None:
        for entity in (edge.source_key, edge.target_key):
            _discard(self.by_entity, entity, edge)
        if self.by_key.get(edge.key) is edge:
            del self.by_key[edge.key]
        _discard(self.by_triple, edge.triple, edge)
        if edge.edge_id is not None:
            _discard(self.by_edge_id, (edge.session, edge.edge_id), edge)

    @staticmethod
    def ordered(edges: dict[int, RelationRow] | None) -> list[RelationRow]:
        return sorted((edges or {}).values(), key=lambda edge: edge.uid)


class RelationRules:
    """Relation rules over the state a `Resolver` keeps (declared here, set by `Resolver.__init__`)."""

    heads: dict[str, EntityRow]
    names: dict[str, set[str]]
    edges: EdgeIndex
    plan: WritePlan
    demands: EdgeDemands
    _made_now: set[int]
    _edge_projections: list[tuple[str, RelationRow, str]]  # this event's, frozen when it ends

    @property
    def event(self) -> SpineEvent:
        raise NotImplementedError

    @property
    def event_uid(self) -> str:
        raise NotImplementedError

    def _resolve_ref(self, ref: EntityRef, at: str, provenance: Provenance) -> EntityRow:
        raise NotImplementedError

    def _demand(self, demands: EdgeDemands) -> None:
        raise NotImplementedError

    def _assert_relation(self, op: RelationAssertion) -> None:
        session = self.event.session
        start = as_canonical(op.valid_from)
        source = self._resolve_ref(op.source, start, op.provenance)
        target = self._resolve_ref(op.target, start, op.provenance)
        start = max(start, source.valid_from, target.valid_from)
        triple = triple_key(session, source.name, target.name, op.relation_type)
        key = relation_key(
            session,
            op.relation_type,
            source.key,
            target.key,
            inferred=op.inferred,
            edge_id=op.edge_id,
            method=op.inference_method,
        )
        if source.key not in self.plan.new_keys:
            self._demand(EdgeDemands(keys={(source.key, key)}))
        audit: dict[str, Any] = {
            "inferred": op.inferred,
            "confidence": op.confidence,
            "inference_method": op.inference_method,
            "evidence_event_hashes": list(op.evidence_event_hashes),
            "evidence_event_seqs": list(op.evidence_event_seqs),
            "evidence_citations": list(op.evidence_citations),
            "evidence_quotes": list(op.evidence_quotes),
            "edge_id": op.edge_id,
            "review_status": op.review_status,
            "authority_status": op.authority_status,
            "derived_from_event_seq": op.derived_from_event_seq,
            "derived_from_event_hash": op.derived_from_event_hash,
        }
        content = content_hash([source.name, target.name, op.relation_type, op.properties, audit])
        existing = self.edges.by_key.get(key)
        if existing is not None:
            same_ends = existing.source_key == source.key and existing.target_key == target.key
            if existing.content == content and same_ends:
                self._project_edge(existing, "unchanged")
                return
            if id(existing) in self._made_now:
                existing.discarded = True
                self.edges.remove(existing)
            else:
                start = max(start, existing.valid_from)
                self._close_edge(existing, start)
        edge = RelationRow(
            key=key,
            triple=triple,
            session=session,
            relation_type=op.relation_type,
            source_key=source.key,
            target_key=target.key,
            source_name=source.name,
            target_name=target.name,
            properties=dict(op.properties),
            valid_from=start,
            valid_to=None,
            source_event_seq=op.provenance.event_seq,
            source_event_hash=op.provenance.event_hash,
            source_event_type=op.provenance.event_type,
            source_thread=op.provenance.source_thread,
            content=content,
            pending=True,
            **audit,
        )
        self._add_edge(edge)
        self._project_edge(edge, "created" if existing is None else "superseded")

    def _add_edge(self, edge: RelationRow) -> None:
        self.edges.add(edge)
        self._made_now.add(id(edge))
        self.plan.new_relations.append(edge)

    def _close_edge(self, edge: RelationRow, at: str) -> None:
        self.edges.remove(edge)
        edge.valid_to = max(at, edge.valid_from)
        if not edge.pending:
            self.plan.closed_relations.append(edge)

    def _demand_triple(self, source: str, triple: str) -> None:
        for key in self.names.get(name_key(self.event.session, source), ()):
            head = self.heads.get(key)
            if head is not None and head.is_open and key not in self.plan.new_keys:
                self._demand(EdgeDemands(triples={(head.key, triple)}))

    def _invalidate_relation(self, op: RelationInvalidation) -> None:
        triple = triple_key(self.event.session, op.source, op.target, op.relation_type)
        self._demand_triple(op.source, triple)
        at = as_canonical(op.invalid_at)
        for edge in self.edges.ordered(self.edges.by_triple.get(triple)):
            self._close_edge(edge, at)
            self._project_edge(edge, "invalidated")

    def _retract(self, op: EdgeRetraction) -> None:
        session = self.event.session
        if op.edge_id is not None:
            edges = self.edges.ordered(self.edges.by_edge_id.get((session, op.edge_id)))
        else:
            triple = triple_key(session, op.source or "", op.target or "", op.relation_type or "")
            self._demand_triple(op.source or "", triple)
            edges = self.edges.ordered(self.edges.by_triple.get(triple))
        at = as_canonical(op.retracted_at)
        for edge in edges:
            if edge.inferred:
                self._close_edge(edge, at)
                self._project_edge(edge, "retracted")

    def _project_edge(self, edge: RelationRow, action: str) -> None:
        self._edge_projections.append((self.event_uid, edge, action))
