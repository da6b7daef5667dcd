"""Payload versions of the design Eventloom implements (the `syndicalt/zaxy` contracts), still accepted.

Each is a legacy version of a current type (`LEGACY_PAYLOADS` in `catalogue.py`) that knows its current
shape: `upgraded(origin)` returns the payload as the current schema would have it, given the session and
actor of the event that carries it (a design payload leaves both implicit). The registry accepts such a
payload on append when its upgrade fits the current schema, and `current_payload` hands every consumer the
upgraded Struct, so nothing downstream reads the design's shape. docs/event-types.md maps field to field.
"""

from __future__ import annotations

from typing import Any, Literal

from eventloom.schemas.catalogue_common import (
    Confidence,
    EventHash,
    Id,
    Name,
    Payload,
    Seq,
    SnakeCase,
    Taxonomy,
    Text,
    Title,
)
from eventloom.schemas.catalogue_memory import CandidateType, Verdict
from eventloom.schemas.registry import Origin


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class SeedEntity(Payload, kw_only=True):
    """The design's entity reference: a name, a type and (unprojected) a summary."""

    name: Name
    entity_type: SnakeCase
    summary: str | None = None

    def subject(self) -> dict[str, Any]:
        return {"name": self.name, "entity_type": self.entity_type}


class SeedEvidence(Payload, kw_only=True):
    """The design's evidence object: the event a derivation rests on, a decision it cites, and why."""

    source_event_seq: Seq | None = None
    source_event_hash: EventHash | None = None
    decision_event_seq: Seq | None = None
    decision_event_hash: EventHash | None = None
    reason: str | None = None

    def items(self) -> list[dict[str, Any]]:
        """The current `evidence` list: the source event (with `reason` as its quote), the decision event;
        `reason` alone when neither is named."""
        found: list[dict[str, Any]] = []
        if self.source_event_seq is not None or self.source_event_hash is not None:
            source = {"event_seq": self.source_event_seq, "event_hash": self.source_event_hash}
            found.append(_without_none({**source, "quote": self.reason or None}))
        if self.decision_event_seq is not None or self.decision_event_hash is not None:
            decision = {"event_seq": self.decision_event_seq, "event_hash": self.decision_event_hash}
            found.append(_without_none(decision))
        if not found and self.reason:
            found.append({"quote": self.reason})
        return found


class InferenceEdgeGeneratedSeed(Payload, kw_only=True):
    """The design's `inference.edge.generated`: typed entity ends, `inference_method`, one evidence object."""

    source: SeedEntity
    target: SeedEntity
    relation_type: SnakeCase
    confidence: Confidence
    inference_method: Name
    evidence: SeedEvidence | None = None

    def upgraded(self, origin: Origin) -> dict[str, Any]:
        evidence = self.evidence or SeedEvidence()
        return _without_none(
            {
                "source": self.source.name,
                "target": self.target.name,
                "relation_type": self.relation_type,
                "confidence": self.confidence,
                "method": self.inference_method,
                "source_entity": self.source.subject(),
                "target_entity": self.target.subject(),
                "source_event_seq": evidence.source_event_seq,
                "source_event_hash": evidence.source_event_hash,
                "evidence": evidence.items(),
            }
        )


class CitedSeedEvidence(SeedEvidence, kw_only=True):
    """The design's causal evidence: it must name its source event by seq and hash."""

    source_event_seq: Seq
    source_event_hash: EventHash


class CausalEdgeGeneratedSeed(Payload, kw_only=True):
    """The design's (2.0 alpha) `causal.edge.generated`: typed ends, the taxonomy in `relation_type`."""

    source: SeedEntity
    target: SeedEntity
    relation_type: Taxonomy
    confidence: Confidence
    causal_method: Name
    evidence: CitedSeedEvidence
    graph_relation_type: SnakeCase | None = None
    review_status: Literal["proposed"] = "proposed"
    authority_status: Literal["non_authoritative"] = "non_authoritative"

    def __post_init__(self) -> None:
        expected = f"causal_{self.relation_type}"
        if self.graph_relation_type is not None and self.graph_relation_type != expected:
            raise ValueError(
                f"`graph_relation_type` must be {expected} for relation_type {self.relation_type}"
            )

    def upgraded(self, origin: Origin) -> dict[str, Any]:
        return {
            "cause": self.source.name,
            "effect": self.target.name,
            "taxonomy": self.relation_type,
            "relation_type": f"causal_{self.relation_type}",
            "confidence": self.confidence,
            "method": self.causal_method,
            "evidence": self.evidence.items(),
            "review_status": self.review_status,
            "authority_status": self.authority_status,
            "source_event_seq": self.evidence.source_event_seq,
            "source_event_hash": self.evidence.source_event_hash,
            "cause_entity": self.source.subject(),
            "effect_entity": self.target.subject(),
        }


class OutcomeExplainedSeed(Payload, kw_only=True):
    """The design's (2.0 alpha) `outcome.explained`: a typed cause and effect, and the evidence object."""

    cause: SeedEntity
    effect: SeedEntity
    relation_type: Taxonomy
    confidence: Confidence | None = None
    evidence: SeedEvidence | None = None

    def upgraded(self, origin: Origin) -> dict[str, Any]:
        evidence = self.evidence or SeedEvidence()
        stated = f"{self.cause.name} {self.relation_type} {self.effect.name}"
        return _without_none(
            {
                "outcome": self.effect.name,
                "explanation": evidence.reason or stated,
                "taxonomy": self.relation_type,
                "cause": self.cause.name,
                "cause_event_seq": evidence.source_event_seq,
                "cause_event_hash": evidence.source_event_hash,
                "confidence": self.confidence,
                "evidence": evidence.items(),
            }
        )


class SeedSourceEvent(Payload, kw_only=True, forbid_unknown_fields=True):
    """The design's cited source event: seq and hash, in the citing event's own session. Nothing else: an
    item with a `session` is the current shape, whose errors are the ones to report."""

    seq: Seq
    hash: EventHash


class ConsolidationCandidateCreatedSeed(Payload, kw_only=True):
    """The design's (2.0 alpha) `consolidation.candidate.created`: source events without a session."""

    candidate_id: Id
    candidate_type: CandidateType
    title: Title
    summary: Text
    source_events: list[SeedSourceEvent]
    confidence: Confidence
    method: Name
    purpose: Text | None = None
    review_status: Literal["pending"] = "pending"
    authority_status: Literal["non_authoritative"] = "non_authoritative"

    def upgraded(self, origin: Origin) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "candidate_type": self.candidate_type,
            "title": self.title,
            "summary": self.summary,
            "source_events": [
                {"session": origin.session, "seq": item.seq, "hash": item.hash} for item in self.source_events
            ],
            "confidence": self.confidence,
            "method": self.method,
            "purpose": self.purpose or UNSTATED_PURPOSE,
        }


UNSTATED_PURPOSE = "not stated"
"""The `purpose` of a design candidate that gives none (the current schema requires one)."""


class ConsolidationCandidateReviewedSeed(Payload, kw_only=True):
    """The design's (2.0 alpha) `consolidation.candidate.reviewed`: `status`, no reviewer (its actor is)."""

    candidate_id: Id
    status: Verdict
    rationale: Text
    authority_status: Literal["non_authoritative"] = "non_authoritative"

    def upgraded(self, origin: Origin) -> dict[str, Any]:
        return {
            "candidate_id": self.candidate_id,
            "decision": self.status,
            "reviewer": origin.actor,
            "rationale": self.rationale,
        }
