"""Temporal resolution, backend-neutral and pure: projections + what the store holds -> rows to write.

The rules (docs/graph-schema.md explains them with examples):

- **Entity versions** are keyed (session, name, entity_type, valid_from). A reassertion merges into the
  current version (a `None` summary keeps it; properties merge key by key; a `None` property is removed).
  Unchanged: nothing is written. Changed: the current version closes (`valid_to` = the new `valid_from`)
  and a new one opens, linked `SUPERSEDED_BY` (old -> new) and `PREVIOUS_VERSION` (new -> old). A new
  version never starts before the one it follows; one that would start at the same instant starts one
  microsecond later, unless both come from the same event, which then simply updates its own version.
- **Invalidation** closes the current version at `invalid_at` (never before it opened) and deletes
  nothing. Asserting the entity again opens a fresh version, linked to the closed one.
- **Relations** join the *current* versions of their ends, which are created (or reopened) when missing.
  An untyped end (a name alone) resolves to the open entity of that name, preferring a real type over the
  placeholder type `entity`, then the most recent. An edge's window lies inside both ends' windows.
- **Carry-forward:** when a version is superseded, each edge still open on it is closed at that instant
  and continued by a copy on the new version (`carried_from` = the closed edge's uid, provenance kept).
  An edge made by the same event is moved instead of copied. When a version is invalidated, its open
  edges close with it.
- **Retraction** closes inferred edges (by `edge_id`, or by source, target and type); **relation
  invalidation** closes every open edge of that triple. Nothing is ever deleted.

Every decision depends only on the events, never on batch boundaries: rebuilding in batches of any size
gives the same graph as applying events one by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from readmodels.graph.identity import (
    content_hash,
    entity_key,
    entity_uid,
    event_uid,
    name_key,
    relation_key,
    source_uid,
    triple_key,
)
from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EntityRef,
    EventProjection,
    GraphOp,
    Provenance,
    RelationAssertion,
    RelationInvalidation,
    SourceCitation,
    SpineEvent,
    TaskObservation,
    canonical_ts,
    ts_after,
)
from readmodels.graph.plan import (
    EdgeDemands,
    EntityRow,
    LoadRequest,
    RelationRow,
    SessionRow,
    Snapshot,
    WritePlan,
)

PLACEHOLDER_TYPE: Final = "entity"
"""The type of an entity created only because a relation named it without a type."""
_CANONICAL: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")


def _ts(value: str) -> str:
    return value if _CANONICAL.fullmatch(value) else canonical_ts(value)


def load_request(projections: Sequence[EventProjection]) -> LoadRequest:
    """The keys, names and edge ids a backend must load before `Resolver.resolve`."""
    keys: dict[str, None] = {}
    names: dict[str, None] = {}
    edge_ids: dict[tuple[str, str], None] = {}
    sessions: dict[str, None] = {}

    def ref(session: str, entity: EntityRef) -> None:
        if entity.entity_type is None:
            names[name_key(session, entity.name)] = None
        else:
            keys[entity_key(session, entity.name, entity.entity_type)] = None

    for projection in projections:
        session = projection.event.session
        sessions[session] = None
        for op in projection.ops:
            if isinstance(op, EntityAssertion | EntityInvalidation):
                keys[entity_key(session, op.name, op.entity_type)] = None
            elif isinstance(op, RelationAssertion):
                ref(session, op.source)
                ref(session, op.target)
            elif isinstance(op, RelationInvalidation):
                names[name_key(session, op.source)] = None
                names[name_key(session, op.target)] = None
            elif isinstance(op, EdgeRetraction):
                if op.edge_id is not None:
                    edge_ids[(session, op.edge_id)] = None
                else:
                    names[name_key(session, op.source or "")] = None
                    names[name_key(session, op.target or "")] = None
            elif isinstance(op, SourceCitation) and op.cited_by is not None:
                ref(session, op.cited_by)
            elif isinstance(op, TaskObservation):
                keys[entity_key(session, op.task_id, "task")] = None
    return LoadRequest(
        sessions=list(sessions), entity_keys=list(keys), name_keys=list(names), edge_ids=list(edge_ids)
    )


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **update}
    return {key: value for key, value in merged.items() if value is not None}


class _EdgeIndex:
    """Open edges by entity version, relation key, triple and (session, edge_id)."""

    def __init__(self) -> None:
        self.by_entity: dict[str, dict[int, RelationRow]] = {}
        self.by_key: dict[str, RelationRow] = {}
        self.by_triple: dict[str, dict[int, RelationRow]] = {}
        self.by_edge_id: dict[tuple[str, str], dict[int, RelationRow]] = {}

    def add(self, edge: RelationRow) -> None:
        self.by_entity.setdefault(edge.source_uid, {})[id(edge)] = edge
        self.by_entity.setdefault(edge.target_uid, {})[id(edge)] = edge
        self.by_key[edge.key] = edge
        self.by_triple.setdefault(edge.triple, {})[id(edge)] = edge
        if edge.edge_id is not None:
            self.by_edge_id.setdefault((edge.session, edge.edge_id), {})[id(edge)] = edge

    def remove(self, edge: RelationRow) -> None:
        for uid in (edge.source_uid, edge.target_uid):
            self.by_entity.get(uid, {}).pop(id(edge), None)
        if self.by_key.get(edge.key) is edge:
            del self.by_key[edge.key]
        self.by_triple.get(edge.triple, {}).pop(id(edge), None)
        if edge.edge_id is not None:
            self.by_edge_id.get((edge.session, edge.edge_id), {}).pop(id(edge), None)

    @staticmethod
    def ordered(edges: dict[int, RelationRow] | None) -> list[RelationRow]:
        return sorted((edges or {}).values(), key=lambda edge: edge.uid)


class Resolver:
    """Resolves one batch against a snapshot. Use once: `Resolver(snapshot).resolve(projections)`."""

    def __init__(self, snapshot: Snapshot) -> None:
        # copies: resolving marks rows closed, and a snapshot may be resolved more than once
        self.heads = {key: msgspec.structs.replace(row) for key, row in snapshot.heads.items()}
        self.names = {key: set(keys) for key, keys in snapshot.names.items()}
        self.edges = _EdgeIndex()
        seen: set[str] = set()
        for edge in [*snapshot.open_edges, *snapshot.edge_id_edges]:
            if edge.is_open and edge.uid not in seen:
                seen.add(edge.uid)
                self.edges.add(msgspec.structs.replace(edge))
        self.plan = WritePlan()
        self.demands = EdgeDemands()
        self._touched: dict[str, None] = {}
        self._made_now: set[int] = set()
        self._event: SpineEvent | None = None

    # -- driving ---------------------------------------------------------------------------------------

    def resolve(self, projections: Iterable[EventProjection]) -> WritePlan:
        for projection in projections:
            self._start_event(projection.event)
            for op in projection.ops:
                self._apply(op)
        plan = self.plan
        plan.heads = {key: self.heads[key] for key in self._touched}
        plan.new_relations = [edge for edge in plan.new_relations if not edge.discarded]
        plan.projected_relations = [item for item in plan.projected_relations if not item[1].discarded]
        return plan

    def _start_event(self, event: SpineEvent) -> None:
        self._event = event
        self._made_now = set()
        self.plan.events.append(event)
        row = self.plan.sessions.get(event.session)
        if row is None:
            self.plan.sessions[event.session] = SessionRow(
                session=event.session,
                first_seq=event.seq,
                first_ts=event.ts,
                last_seq=event.seq,
                last_ts=event.ts,
                last_hash=event.hash,
                count=1,
            )
        else:
            row.last_seq, row.last_ts, row.last_hash = event.seq, event.ts, event.hash
            row.count += 1
        self.plan.applied[event.session] = (event.seq, event.hash)

    @property
    def event(self) -> SpineEvent:
        assert self._event is not None
        return self._event

    @property
    def event_uid(self) -> str:
        return event_uid(self.event.session, self.event.seq)

    def _apply(self, op: GraphOp) -> None:
        if isinstance(op, EntityAssertion):
            self._assert_entity(op)
        elif isinstance(op, RelationAssertion):
            self._assert_relation(op)
        elif isinstance(op, EntityInvalidation):
            self._invalidate_entity(op)
        elif isinstance(op, RelationInvalidation):
            self._invalidate_relation(op)
        elif isinstance(op, EdgeRetraction):
            self._retract(op)
        elif isinstance(op, SourceCitation):
            self._cite(op)
        else:
            self._observe(op)

    # -- entities ----------------------------------------------------------------------------------------

    def _assert_entity(self, op: EntityAssertion) -> None:
        session = self.event.session
        key = entity_key(session, op.name, op.entity_type)
        start = _ts(op.valid_from)
        latest = self.heads.get(key)
        if latest is None:
            row = self._new_version(
                key, op.name, op.entity_type, start, op.summary, _merge({}, op.properties), op.provenance
            )
            self._project(row, "created")
            return
        if latest.is_open:
            summary = op.summary if op.summary is not None else latest.summary
            properties = _merge(latest.properties, op.properties)
            if summary == latest.summary and properties == latest.properties:
                self._project(latest, "unchanged")
                return
            if id(latest) in self._made_now:
                latest.summary, latest.properties = summary, properties
                self._project(latest, "updated")
                return
            start = max(start, latest.valid_from)
            if start == latest.valid_from:
                start = ts_after(start)
            row = self._new_version(
                key, op.name, op.entity_type, start, summary, properties, op.provenance, latest
            )
            self._close_entity(latest, start, successor=row)
            self._project(row, "superseded")
            return
        start = self._after_closed(latest, start)
        row = self._new_version(
            key, op.name, op.entity_type, start, op.summary, _merge({}, op.properties), op.provenance, latest
        )
        self._project(row, "reopened")

    @staticmethod
    def _after_closed(latest: EntityRow, start: str) -> str:
        assert latest.valid_to is not None
        start = max(start, latest.valid_to)
        return ts_after(start) if start == latest.valid_from else start

    def _new_version(
        self,
        key: str,
        name: str,
        entity_type: str,
        start: str,
        summary: str | None,
        properties: dict[str, Any],
        provenance: Provenance,
        previous: EntityRow | None = None,
    ) -> EntityRow:
        row = EntityRow(
            uid=entity_uid(key, start),
            key=key,
            session=self.event.session,
            name=name,
            entity_type=entity_type,
            summary=summary,
            properties=properties,
            valid_from=start,
            valid_to=None,
            version=previous.version + 1 if previous is not None else 1,
            source_event_seq=provenance.event_seq,
            source_event_hash=provenance.event_hash,
            source_event_type=provenance.event_type,
            source_thread=provenance.source_thread,
            pending=True,
        )
        self.heads[key] = row
        self._touched[key] = None
        self._made_now.add(id(row))
        self.names.setdefault(name_key(row.session, name), set()).add(key)
        self.plan.new_entities.append(row)
        if previous is not None:
            self.plan.version_links.append((previous.uid, row.uid, start))
        return row

    def _close_entity(self, row: EntityRow, at: str, successor: EntityRow | None) -> None:
        row.valid_to = max(at, row.valid_from)
        if not row.pending:
            self.plan.closed_entities.append(row)
            self.demands.entities.add(row.uid)
        for edge in self.edges.ordered(self.edges.by_entity.get(row.uid)):
            if successor is None:
                self._close_edge(edge, row.valid_to)
            else:
                self._carry(edge, row, successor)

    def _invalidate_entity(self, op: EntityInvalidation) -> None:
        latest = self.heads.get(entity_key(self.event.session, op.name, op.entity_type))
        if latest is not None and latest.is_open:
            self._close_entity(latest, _ts(op.invalid_at), successor=None)
            self._project(latest, "invalidated")

    def _resolve_ref(self, ref: EntityRef, at: str, provenance: Provenance) -> EntityRow:
        """The open version `ref` names, created or reopened (with its last content) when there is none."""
        session = self.event.session
        entity_type = ref.entity_type
        if entity_type is None:
            candidates = [
                self.heads[key]
                for key in self.names.get(name_key(session, ref.name), ())
                if key in self.heads
            ]
            if candidates:
                best = max(
                    candidates,
                    key=lambda r: (r.is_open, r.entity_type != PLACEHOLDER_TYPE, r.valid_from, r.entity_type),
                )
                entity_type = best.entity_type
            else:
                entity_type = PLACEHOLDER_TYPE
        key = entity_key(session, ref.name, entity_type)
        latest = self.heads.get(key)
        if latest is not None and latest.is_open:
            return latest
        if latest is None:
            row = self._new_version(key, ref.name, entity_type, at, None, {}, provenance)
            self._project(row, "referenced")
            return row
        start = self._after_closed(latest, at)
        row = self._new_version(
            key, ref.name, entity_type, start, latest.summary, dict(latest.properties), provenance, latest
        )
        self._project(row, "reopened")
        return row

    def _project(self, row: EntityRow, action: str) -> None:
        self.plan.projected_entities.append((self.event_uid, row, action))

    # -- relations ---------------------------------------------------------------------------------------

    def _assert_relation(self, op: RelationAssertion) -> None:
        session = self.event.session
        start = _ts(op.valid_from)
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
        if not source.pending:
            self.demands.keys.add((source.uid, key))
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
            same_ends = existing.source_uid == source.uid and existing.target_uid == target.uid
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
            source_uid=source.uid,
            target_uid=target.uid,
            source_name=source.name,
            target_name=target.name,
            properties=dict(op.properties),
            valid_from=start,
            valid_to=None,
            source_event_seq=op.provenance.event_seq,
            source_event_hash=op.provenance.event_hash,
            source_event_type=op.provenance.event_type,
            source_thread=op.provenance.source_thread,
            carried_from=None,
            carried_by_event_seq=None,
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

    def _carry(self, edge: RelationRow, old: EntityRow, new: EntityRow) -> None:
        if id(edge) in self._made_now:
            self.edges.remove(edge)
            edge.source_uid = new.uid if edge.source_uid == old.uid else edge.source_uid
            edge.target_uid = new.uid if edge.target_uid == old.uid else edge.target_uid
            edge.valid_from = max(edge.valid_from, new.valid_from)
            self.edges.add(edge)
            return
        previous_uid = edge.uid
        self._close_edge(edge, new.valid_from)
        copy = msgspec.structs.replace(
            edge,
            source_uid=new.uid if edge.source_uid == old.uid else edge.source_uid,
            target_uid=new.uid if edge.target_uid == old.uid else edge.target_uid,
            valid_from=max(new.valid_from, edge.valid_from),
            valid_to=None,
            carried_from=previous_uid,
            carried_by_event_seq=self.event.seq,
            loaded_uid=None,
            pending=True,
            evidence_event_hashes=list(edge.evidence_event_hashes),
            evidence_event_seqs=list(edge.evidence_event_seqs),
            evidence_citations=list(edge.evidence_citations),
            evidence_quotes=list(edge.evidence_quotes),
            properties=dict(edge.properties),
        )
        self._add_edge(copy)

    def _demand_triple(self, source: str, triple: str) -> None:
        for key in self.names.get(name_key(self.event.session, source), ()):
            head = self.heads.get(key)
            if head is not None and head.is_open and not head.pending:
                self.demands.triples.add((head.uid, triple))

    def _invalidate_relation(self, op: RelationInvalidation) -> None:
        triple = triple_key(self.event.session, op.source, op.target, op.relation_type)
        self._demand_triple(op.source, triple)
        at = _ts(op.invalid_at)
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
        at = _ts(op.retracted_at)
        for edge in edges:
            if edge.inferred:
                self._close_edge(edge, at)
                self._project_edge(edge, "retracted")

    def _project_edge(self, edge: RelationRow, action: str) -> None:
        self.plan.projected_relations.append((self.event_uid, edge, action))

    # -- sources and observations ------------------------------------------------------------------------

    def _cite(self, op: SourceCitation) -> None:
        session = self.event.session
        uid = source_uid(session, op.path, op.line_start, op.line_end, op.checksum)
        known = self.plan.sources.get(uid)
        if known is None or (known["text"] is None and op.text is not None):
            self.plan.sources[uid] = {
                "uid": uid,
                "session": session,
                "path": op.path,
                "line_start": op.line_start,
                "line_end": op.line_end,
                "checksum": op.checksum,
                "text": op.text,
            }
        cite = {
            "source_uid": uid,
            "path": op.path,
            "line_start": op.line_start,
            "line_end": op.line_end,
            "checksum": op.checksum,
            "source_event_seq": op.provenance.event_seq,
            "source_event_hash": op.provenance.event_hash,
        }
        if op.cited_by_event:
            self.plan.event_citations.append({"event_uid": self.event_uid, **cite})
        if op.cited_by is not None:
            row = self._resolve_ref(op.cited_by, self.event.ts, op.provenance)
            self.plan.entity_citations.append((row, cite))

    def _observe(self, op: TaskObservation) -> None:
        key = entity_key(self.event.session, op.task_id, "task")
        row = self.heads.get(key)
        if row is None:
            row = self._resolve_ref(EntityRef(op.task_id, "task"), self.event.ts, op.provenance)
        self.plan.observations.append(
            (
                row,
                {
                    "event_uid": self.event_uid,
                    "kind": op.kind,
                    "task_id": op.task_id,
                    "session": self.event.session,
                    "seq": self.event.seq,
                    "ts": self.event.ts,
                },
            )
        )
