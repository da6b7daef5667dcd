"""What the graph read model answers with: plain frozen Structs, the same on every backend."""

from __future__ import annotations

from typing import Any

import msgspec


class EventRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An `Event` node of the session spine."""

    session: str
    seq: int
    hash: str
    prev_hash: str | None
    type: str
    ts: str
    actor: str
    summary: str
    citation: str
    caused_by: list[str] = msgspec.field(default_factory=list)


class EntityVersion(msgspec.Struct, frozen=True, kw_only=True):
    """One version of an entity: what it was, over which window, and which event said so."""

    uid: str
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

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


class RelationEdge(msgspec.Struct, frozen=True, kw_only=True):
    """One edge between two entities (their keys, `identity.entity_key`), with its window, provenance and
    audit fields. It joins entities, not versions: revising either end leaves it as it is."""

    uid: str
    session: str
    relation_type: str
    source_key: str
    source_name: str
    source_entity_type: str
    target_key: str
    target_name: str
    target_entity_type: str
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


class Neighbour(msgspec.Struct, frozen=True, kw_only=True):
    """An entity reached by traversal: how many hops away, and the edge that reached it first."""

    entity: EntityVersion
    depth: int
    via: RelationEdge


class SourceCitationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """A cited span of a source, and who cites it: an event (`entity_uid` None) or an entity version."""

    source_uid: str
    session: str
    path: str
    line_start: int | None
    line_end: int | None
    checksum: str | None
    text: str | None
    cited_by_event_seq: int  # the event that recorded the citation
    entity_uid: str | None = None
    entity_name: str | None = None
    entity_type: str | None = None


class ObservationRecord(msgspec.Struct, frozen=True, kw_only=True):
    """An event observed while working on a task (command, file edit, tool call, checkpoint)."""

    task_id: str
    kind: str
    session: str
    seq: int
    event_type: str
    ts: str
    task_version_uid: str
