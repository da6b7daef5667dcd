"""Payload schemas of authoritative memory: asserted facts, their invalidation, and consolidation review."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from eventloom.schemas.catalogue_common import (
    Confidence,
    Id,
    Name,
    Payload,
    SnakeCase,
    Text,
    Timestamp,
)


class EntityFact(Payload, kw_only=True):
    """An entity asserted as true: its name and strict snake_case type identify it in the graph."""

    name: Name
    entity_type: SnakeCase
    summary: str | None = None
    properties: dict[str, Any] = msgspec.field(default_factory=dict)


class RelationFact(Payload, kw_only=True):
    """A typed relation between two entities, named by their `name`s."""

    source: Name
    target: Name
    relation_type: SnakeCase
    properties: dict[str, Any] = msgspec.field(default_factory=dict)


class MemoryFactAsserted(Payload, kw_only=True):
    """`memory.fact.asserted`: entities and relations now hold (from `valid_from`, else the event's `ts`)."""

    entities: list[EntityFact] = msgspec.field(default_factory=list)
    relations: list[RelationFact] = msgspec.field(default_factory=list)
    valid_from: Timestamp | None = None
    source_thread: Id | None = None

    def __post_init__(self) -> None:
        if not self.entities and not self.relations:
            raise ValueError("a fact needs at least one entry in `entities` or `relations`")


class EntityRef(Payload, kw_only=True):
    """Names one entity: by name and type."""

    name: Name
    entity_type: SnakeCase


class RelationRef(Payload, kw_only=True):
    """Names one relation: by its two ends and its type."""

    source: Name
    target: Name
    relation_type: SnakeCase


class MemoryInvalidated(Payload, kw_only=True):
    """`memory.invalidated`: an entity or relation stops holding at `invalid_at` (its window closes)."""

    invalid_at: Timestamp
    entity: EntityRef | None = None
    relation: RelationRef | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if (self.entity is None) == (self.relation is None):
            raise ValueError("name exactly one of `entity` or `relation`")


class ConsolidationCandidateCreated(Payload, kw_only=True):
    """`consolidation.candidate.created`: a proposal to merge or summarise memory, awaiting review."""

    candidate_id: Id
    proposal: Text
    entities: list[Name] = msgspec.field(default_factory=list)
    facts: list[str] = msgspec.field(default_factory=list)
    method: Name | None = None
    confidence: Confidence | None = None


class ConsolidationCandidateReviewed(Payload, kw_only=True):
    """`consolidation.candidate.reviewed`: a reviewer's verdict on a consolidation candidate."""

    candidate_id: Id
    decision: Literal["accepted", "rejected", "deferred"]
    reviewer: Name
    note: str | None = None
