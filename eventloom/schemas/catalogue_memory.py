"""Payload schemas of authoritative memory: asserted facts, their invalidation, and consolidation review."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

import msgspec
from msgspec import Meta

from eventloom.schemas.catalogue_common import (
    Confidence,
    Id,
    Name,
    Payload,
    SnakeCase,
    SourceEvent,
    SubjectRef,
    Text,
    Timestamp,
    Title,
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


CandidateType: TypeAlias = Literal["episode", "claim", "procedure"]
"""What a consolidation candidate proposes: a summary of a stretch of one session (`episode`), one fact
asserted several times or in several sessions (`claim`), or a command/tool sequence that repeatedly led to
success (`procedure`)."""
Verdict: TypeAlias = Literal["accepted", "rejected", "deferred", "conflicted"]


class ConsolidationCandidateCreated(Payload, kw_only=True):
    """`consolidation.candidate.created` (payload version 2): a cited proposal to consolidate memory.

    It is never a fact: it waits for a review, and only an accepted, promoted candidate answers as memory.
    """

    candidate_id: Id
    candidate_type: CandidateType
    title: Title
    summary: Text
    source_events: Annotated[list[SourceEvent], Meta(min_length=1)]
    confidence: Confidence
    method: Name
    purpose: Text
    about: list[SubjectRef] = msgspec.field(default_factory=list)
    """The entities the candidate concerns; once promoted, each points to the consolidated memory."""
    relations: list[RelationRef] = msgspec.field(default_factory=list)
    """For a `claim`: the relation asserted several times."""
    summary_by: Name | None = None
    """Who wrote `title` and `summary`: `extractive` (the default) or `llm:<model>`; never the citations."""


class ConsolidationCandidateCreatedV1(Payload, kw_only=True):
    """Payload version 1 of `consolidation.candidate.created`: no type, no cited source events.

    Still readable (it has `proposal` and no `candidate_type`); it projects as a legacy candidate that
    cannot be promoted, because nothing it says can be checked against the log.
    """

    candidate_id: Id
    proposal: Text
    entities: list[Name] = msgspec.field(default_factory=list)
    facts: list[str] = msgspec.field(default_factory=list)
    method: Name | None = None
    confidence: Confidence | None = None


class ConsolidationCandidateReviewed(Payload, kw_only=True):
    """`consolidation.candidate.reviewed` (payload version 2): a reviewer's verdict, with a rationale.

    `candidate_id` names a consolidation candidate or a proposed `same_as` edge (its `edge_id`).
    """

    candidate_id: Id
    decision: Verdict
    reviewer: Name
    rationale: Text
    candidate_event: SourceEvent | None = None
    """The event that proposed the candidate, when the reviewer names it (the CLI and MCP tools do)."""
    conflicts_with: list[Id] = msgspec.field(default_factory=list)
    """For `conflicted`: the candidates or facts it conflicts with."""


class ConsolidationCandidateReviewedV1(Payload, kw_only=True):
    """Payload version 1 of `consolidation.candidate.reviewed`: an optional `note`, no `conflicted`."""

    candidate_id: Id
    decision: Literal["accepted", "rejected", "deferred"]
    reviewer: Name
    note: str | None = None


class ConsolidationCandidatePromoted(Payload, kw_only=True):
    """`consolidation.candidate.promoted`: an accepted candidate becomes authoritative memory.

    It carries the candidate's content and citations (so it answers on its own, cited), the candidate's
    event and the accepting review's event.
    """

    candidate_id: Id
    candidate_type: CandidateType
    title: Title
    summary: Text
    source_events: Annotated[list[SourceEvent], Meta(min_length=1)]
    candidate_event: SourceEvent
    review_event: SourceEvent
    promoted_by: Name
    about: list[SubjectRef] = msgspec.field(default_factory=list)
    relations: list[RelationRef] = msgspec.field(default_factory=list)


class ConsolidationPromotionRetracted(Payload, kw_only=True):
    """`consolidation.promotion.retracted`: a promoted memory stops holding; its sources stand alone again."""

    candidate_id: Id
    reason: Text
    retracted_by: Name
