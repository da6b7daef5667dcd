"""Payload schemas of non-authoritative knowledge: inferred edges, causal edges, explained outcomes."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from eventloom.schemas.catalogue_common import (
    Confidence,
    EventHash,
    Evidence,
    Id,
    Name,
    Payload,
    Seq,
    SnakeCase,
    SubjectRef,
    Taxonomy,
    Text,
    Title,
)


class InferenceEdgeGenerated(Payload, kw_only=True):
    """`inference.edge.generated`: a producer inferred a relation, with how sure it is and why."""

    source: Name
    target: Name
    relation_type: SnakeCase
    confidence: Confidence
    method: Name
    edge_id: Id | None = None
    source_event_seq: Seq | None = None
    source_event_hash: EventHash | None = None
    evidence: list[Evidence] = msgspec.field(default_factory=list)
    review_status: SnakeCase = "proposed"
    """`proposed` (default); `accepted` when a reviewer re-asserts the edge (only tokens with review rights
    may): reads follow accepted `same_as` edges, and only those."""
    source_entity: SubjectRef | None = None
    """The entity `source` names, with its type; without it the graph finds the entity by name."""
    target_entity: SubjectRef | None = None


class EdgeTarget(Payload, kw_only=True):
    """Names an inferred edge: by `edge_id`, or by `source`, `target` and `relation_type` together."""

    edge_id: Id | None = None
    source: Name | None = None
    target: Name | None = None
    relation_type: SnakeCase | None = None

    def __post_init__(self) -> None:
        named = self.source is not None and self.target is not None and self.relation_type is not None
        if self.edge_id is None and not named:
            raise ValueError("name the edge by `edge_id` or by `source`, `target` and `relation_type`")


class InferenceEdgeContradicted(EdgeTarget, kw_only=True):
    """`inference.edge.contradicted`: evidence speaks against an inferred edge."""

    reason: Text
    confidence: Confidence | None = None
    evidence: list[Evidence] = msgspec.field(default_factory=list)


class InferenceEdgeRetracted(EdgeTarget, kw_only=True):
    """`inference.edge.retracted`: an inferred edge is withdrawn."""

    reason: Text
    retracted_by_event_hash: EventHash | None = None


class CausalEdgeGenerated(Payload, kw_only=True):
    """`causal.edge.generated` (payload version 2): a proposed causal link, never authoritative unreviewed.

    At least one `evidence` item must cite an event (`event_seq` and `event_hash`); consumers refuse the edge
    into the dead-letter queue when a cited event does not exist or its hash differs. `cause_entity` and
    `effect_entity` name what the two ends are about; without them, an end is an entity named by its text.
    """

    cause: Title
    effect: Title
    taxonomy: Taxonomy
    relation_type: SnakeCase
    confidence: Confidence
    method: Name
    evidence: Annotated[list[Evidence], Meta(min_length=1)]
    review_status: SnakeCase = "proposed"
    authority_status: SnakeCase = "non_authoritative"
    edge_id: Id | None = None
    source_event_seq: Seq | None = None
    source_event_hash: EventHash | None = None
    cause_entity: SubjectRef | None = None
    effect_entity: SubjectRef | None = None

    def __post_init__(self) -> None:
        if not any(item.cites_event for item in self.evidence):
            raise ValueError("`evidence` must cite at least one event by `event_seq` and `event_hash`")


class CausalEdgeGeneratedV1(Payload, kw_only=True):
    """Payload version 1 of `causal.edge.generated`: citations optional. Still readable; consumers refuse
    one that cites no event, and check the ones it cites like version 2's."""

    cause: Title
    effect: Title
    taxonomy: Taxonomy
    relation_type: SnakeCase
    confidence: Confidence
    method: Name
    review_status: SnakeCase = "proposed"
    authority_status: SnakeCase = "non_authoritative"
    edge_id: Id | None = None
    source_event_seq: Seq | None = None
    source_event_hash: EventHash | None = None
    evidence: list[Evidence] = msgspec.field(default_factory=list)


class OutcomeExplained(Payload, kw_only=True):
    """`outcome.explained`: why an outcome happened, in one of the causal taxonomy's terms."""

    outcome: Title
    explanation: Text
    taxonomy: Taxonomy
    cause: Title | None = None
    cause_event_seq: Seq | None = None
    cause_event_hash: EventHash | None = None
    confidence: Confidence | None = None
    evidence: list[Evidence] = msgspec.field(default_factory=list)
    about: list[SubjectRef] = msgspec.field(default_factory=list)
    """The entities the outcome concerns (`auth-service` for "the outage of auth-service")."""
