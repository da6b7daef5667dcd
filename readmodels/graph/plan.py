"""The working state of one batch: what a backend loads before resolving, and what it must write after.

`versioning.Resolver` turns projections plus a `Snapshot` (the current versions, names and open edges the
batch touches, as loaded by the backend) into a `WritePlan`: plain rows, ready for `UNWIND`. The rows are
mutable on purpose; they are private to one batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from readmodels.graph.identity import edge_uid, encode_json, entity_key, name_key
from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EntityRef,
    EventProjection,
    RelationAssertion,
    RelationInvalidation,
    SourceCitation,
    SpineEvent,
    TaskObservation,
)

ENTITY_FIELDS: tuple[str, ...] = (
    "uid",
    "key",
    "session",
    "name",
    "entity_type",
    "summary",
    "properties",
    "valid_from",
    "valid_to",
    "version",
    "source_event_seq",
    "source_event_hash",
    "source_event_type",
    "source_thread",
)
"""Properties of an `Entity` node, in schema order (`properties` is JSON text)."""

EDGE_FIELDS: tuple[str, ...] = (
    "uid",
    "key",
    "triple",
    "session",
    "relation_type",
    "properties",
    "valid_from",
    "valid_to",
    "source_event_seq",
    "source_event_hash",
    "source_event_type",
    "source_thread",
    "inferred",
    "confidence",
    "inference_method",
    "evidence_event_hashes",
    "evidence_event_seqs",
    "evidence_citations",
    "evidence_quotes",
    "edge_id",
    "review_status",
    "authority_status",
    "derived_from_event_seq",
    "derived_from_event_hash",
    "content",
)
"""Properties of `RELATES` and of every typed relationship (`PROJECTED_RELATION` has the audit subset)."""


class EntityRow(msgspec.Struct, gc=False, kw_only=True):
    """One entity version, as loaded or as about to be created."""

    uid: str
    key: str
    session: str
    name: str
    entity_type: str
    summary: str | None
    properties: dict[str, Any]
    valid_from: str
    valid_to: str | None
    version: int
    source_event_seq: int
    source_event_hash: str
    source_event_type: str
    source_thread: str | None
    pending: bool = False  # created by this batch

    @property
    def is_open(self) -> bool:
        return self.valid_to is None

    def row(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in ENTITY_FIELDS}
        values["properties"] = encode_json(self.properties)
        return values


class RelationRow(msgspec.Struct, gc=False, kw_only=True):
    """One edge (`RELATES` and its typed twin), as loaded or as about to be created."""

    key: str
    triple: str
    session: str
    relation_type: str
    source_key: str  # the entities it joins (`identity.entity_key`): an edge outlives versions
    target_key: str
    source_name: str
    target_name: str
    properties: dict[str, Any]
    valid_from: str
    valid_to: str | None
    source_event_seq: int
    source_event_hash: str
    source_event_type: str
    source_thread: str | None
    inferred: bool
    confidence: float | None
    inference_method: str | None
    evidence_event_hashes: list[str]
    evidence_event_seqs: list[int]
    evidence_citations: list[str]
    evidence_quotes: list[str]
    edge_id: str | None
    review_status: str | None
    authority_status: str | None
    derived_from_event_seq: int | None
    derived_from_event_hash: str | None
    content: str  # content hash: what a reassertion is compared against
    loaded_uid: str | None = None  # set for edges read from the store; pending edges derive theirs
    derived_uid: str | None = None  # memo: the key, ends, start and event it derives from never change
    pending: bool = False
    discarded: bool = False  # replaced by a later statement of the same event

    @property
    def uid(self) -> str:
        if self.loaded_uid is not None:
            return self.loaded_uid
        if self.derived_uid is None:
            self.derived_uid = edge_uid(
                self.key, self.source_key, self.target_key, self.valid_from, self.source_event_seq
            )
        return self.derived_uid

    @property
    def is_open(self) -> bool:
        return self.valid_to is None

    def row(self) -> dict[str, Any]:
        values = {name: getattr(self, name) for name in EDGE_FIELDS}
        values["properties"] = encode_json(self.properties)
        values["source_key"] = self.source_key
        values["target_key"] = self.target_key
        return values


class LoadRequest(msgspec.Struct, kw_only=True):
    """What a backend must read before resolving a batch."""

    sessions: list[str] = msgspec.field(default_factory=list)
    entity_keys: list[str] = msgspec.field(default_factory=list)
    name_keys: list[str] = msgspec.field(default_factory=list)
    edge_ids: list[tuple[str, str]] = msgspec.field(default_factory=list)  # (session, edge_id)


class EdgeDemands(msgspec.Struct, kw_only=True):
    """The stored open edges a batch's resolution looked for (see `versioning.Resolver`).

    A first resolution without any edges names them; the backend loads exactly these and resolves
    again. So a batch reads the edges of the entities it invalidates and the relations it reasserts, never
    the whole neighbourhood of every entity it merely mentions or revises (an agent with thousands of
    tasks).
    """

    entities: set[str] = msgspec.field(default_factory=set)  # every open edge of these entity keys
    keys: set[tuple[str, str]] = msgspec.field(default_factory=set)  # (source entity key, relation key)
    triples: set[tuple[str, str]] = msgspec.field(default_factory=set)  # (source entity key, triple)


class Snapshot(msgspec.Struct, kw_only=True):
    """What the backend read: latest versions, keys by name, and the open edges of those versions.

    `heads` must hold the latest version (open or closed) of every requested key that exists, plus of every
    key listed under a requested name in `names`; `open_edges` the open edges named by the `EdgeDemands`
    of a first resolution; and `edge_id_edges` every open edge whose `(session, edge_id)` was requested.
    """

    heads: dict[str, EntityRow] = msgspec.field(default_factory=dict)
    names: dict[str, set[str]] = msgspec.field(default_factory=dict)
    open_edges: list[RelationRow] = msgspec.field(default_factory=list)
    edge_id_edges: list[RelationRow] = msgspec.field(default_factory=list)


class SessionRow(msgspec.Struct, gc=False, kw_only=True):
    session: str
    first_seq: int
    first_ts: str
    last_seq: int
    last_ts: str
    last_hash: str
    count: int


class WritePlan(msgspec.Struct, kw_only=True):
    """Everything one batch writes, in the order a backend should write it."""

    events: list[SpineEvent] = msgspec.field(default_factory=list)
    sessions: dict[str, SessionRow] = msgspec.field(default_factory=dict)
    new_entities: list[EntityRow] = msgspec.field(default_factory=list)
    closed_entities: list[EntityRow] = msgspec.field(default_factory=list)
    heads: dict[str, EntityRow] = msgspec.field(default_factory=dict)  # key -> latest version after
    new_keys: set[str] = msgspec.field(default_factory=set)  # keys that had no version before the batch
    version_links: list[tuple[str, str, str]] = msgspec.field(default_factory=list)  # (older, newer, at)
    new_relations: list[RelationRow] = msgspec.field(default_factory=list)
    closed_relations: list[RelationRow] = msgspec.field(default_factory=list)
    projected_entities: list[tuple[str, EntityRow, str]] = msgspec.field(default_factory=list)
    projected_relations: list[tuple[str, RelationRow, str]] = msgspec.field(default_factory=list)
    sources: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)
    event_citations: list[dict[str, Any]] = msgspec.field(default_factory=list)
    entity_citations: list[tuple[EntityRow, dict[str, Any]]] = msgspec.field(default_factory=list)
    observations: list[tuple[EntityRow, dict[str, Any]]] = msgspec.field(default_factory=list)
    applied: dict[str, tuple[int, str]] = msgspec.field(default_factory=dict)  # session -> (seq, hash)

    def entity_key_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "key": key,
                "session": head.session,
                "name": head.name,
                "entity_type": head.entity_type,
                "name_key": name_key(head.session, head.name),
                "latest_uid": head.uid,
                "versions": head.version,
            }
            for key, head in self.heads.items()
        ]


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
