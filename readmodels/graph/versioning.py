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
- **Relations** join *entities* (their keys), not versions: an edge stays as it is while either end is
  revised, so an entity revised in every fact and related to many others costs one row per relation, not
  one per relation and revision. Its ends' current versions are created (or reopened) when missing, and it
  starts no earlier than either. An untyped end (a name alone) resolves to the open entity of that name,
  preferring a real type over the placeholder type `entity`, then the most recent. When an entity is
  invalidated, its open edges close with it; reopening it does not reopen them.
- **Retraction** closes inferred edges (by `edge_id`, or by source, target and type); **relation
  invalidation** closes every open edge of that triple. Nothing is ever deleted.

Every decision depends only on the events, never on batch boundaries: rebuilding in batches of any size
gives the same graph as applying events one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

import msgspec

from readmodels.graph.identity import (
    entity_key,
    entity_uid,
    event_uid,
    name_key,
    source_uid,
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
    as_canonical,
    ts_after,
)
from readmodels.graph.plan import (
    EdgeDemands,
    EntityRow,
    RelationRow,
    SessionRow,
    Snapshot,
    WritePlan,
    load_request,
)
from readmodels.graph.relations import EdgeIndex, RelationRules

__all__ = ["PLACEHOLDER_TYPE", "Resolver", "load_request"]

KnownEdges = Callable[[EdgeDemands], list[RelationRow]]
"""Every stored open edge some demands name, answered during resolution (a store that remembers them); it
raises when it does not know them all, and the store resolves in two passes instead (see `Resolver`)."""
PLACEHOLDER_TYPE: Final = "entity"
"""The type of an entity created only because a relation named it without a type."""


def _merge(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    merged = {**base, **update}
    return {key: value for key, value in merged.items() if value is not None}


class Resolver(RelationRules):
    """Resolves a batch against a snapshot: `Resolver(snapshot).resolve(projections)`.

    The stored open edges a batch needs are known only as it is resolved (the entities it invalidates,
    the relations it reasserts). Without `known_edges`, a first pass names them (`demands`), the store loads
    them into the snapshot, and a second pass resolves; with `known_edges` (a store's memory of them),
    one pass takes each in as it is named.

    `resolve` may be called again with the projections that follow: it continues from the state the
    previous call left, adding to the same plan (a rebuild resolves the whole log this way, see
    `readmodels.graph.bulk.resolve`).
    """

    def __init__(self, snapshot: Snapshot, known_edges: KnownEdges | None = None) -> None:
        # copies: resolving marks rows closed, and a snapshot may be resolved more than once
        self.heads = {key: msgspec.structs.replace(row) for key, row in snapshot.heads.items()}
        self.names = {key: set(keys) for key, keys in snapshot.names.items()}
        self.edges = EdgeIndex()
        self._known_edges = known_edges
        self._stored: set[str] = set()  # uids of the stored edges taken in (never twice: one may be closed)
        for edge in [*snapshot.open_edges, *snapshot.edge_id_edges]:
            self._take_stored(edge)
        self.plan = WritePlan()
        self.demands = EdgeDemands()
        self._touched: dict[str, None] = {}
        self._made_now: set[int] = set()
        self._edge_projections: list[tuple[str, RelationRow, str]] = []
        self._event: SpineEvent | None = None

    def _take_stored(self, edge: RelationRow) -> None:
        if edge.is_open and edge.uid not in self._stored:
            self._stored.add(edge.uid)
            self.edges.add(msgspec.structs.replace(edge))

    def _demand(self, demands: EdgeDemands) -> None:
        """Name stored open edges this batch needs; with `known_edges`, take them in at once."""
        self.demands.entities |= demands.entities
        self.demands.keys |= demands.keys
        self.demands.triples |= demands.triples
        if self._known_edges is not None:
            for edge in self._known_edges(demands):
                self._take_stored(edge)

    # -- driving ---------------------------------------------------------------------------------------

    def resolve(self, projections: Iterable[EventProjection]) -> WritePlan:
        for projection in projections:
            self._start_event(projection.event)
            for op in projection.ops:
                self._apply(op)
            self._finish_event()
        plan = self.plan
        plan.heads = {key: self.heads[key] for key in self._touched}
        plan.new_relations = [edge for edge in plan.new_relations if not edge.discarded]
        return plan

    def _finish_event(self) -> None:
        """Record each edge as this event left it: later events may close it, and batch boundaries
        must not change what `PROJECTED_RELATION` says."""
        for event, edge, action in self._edge_projections:
            if not edge.discarded:
                self.plan.projected_relations.append((event, msgspec.structs.replace(edge), action))
        self._edge_projections = []

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
        start = as_canonical(op.valid_from)
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
        else:
            self.plan.new_keys.add(key)  # no version was known: the key itself is new
        return row

    def _close_entity(self, row: EntityRow, at: str, successor: EntityRow | None) -> None:
        row.valid_to = max(at, row.valid_from)
        if not row.pending:
            self.plan.closed_entities.append(row)
        if successor is not None:
            return  # edges join entities, not versions: a new version leaves them as they are
        if row.key not in self.plan.new_keys:  # an entity new in this batch has no stored edges
            self._demand(EdgeDemands(entities={row.key}))
        for edge in self.edges.ordered(self.edges.by_entity.get(row.key)):
            self._close_edge(edge, row.valid_to)

    def _invalidate_entity(self, op: EntityInvalidation) -> None:
        latest = self.heads.get(entity_key(self.event.session, op.name, op.entity_type))
        if latest is not None and latest.is_open:
            self._close_entity(latest, as_canonical(op.invalid_at), successor=None)
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
