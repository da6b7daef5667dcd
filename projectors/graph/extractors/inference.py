"""Extraction of non-authoritative knowledge: inferred and causal edges, retractions, explained outcomes.

Inferred and causal edges keep their whole audit trail on the edge: confidence, method, evidence (event
hashes and seqs, citations, quotes), the event they were derived from, the review status (a reviewer's
re-assertion of an inferred edge as `accepted` versions the edge: the proposed one closes, the accepted one
opens), and for causal edges the authority status. A contradiction is recorded on the spine only; it is
the retraction a producer derives from it that closes the edge. A causal edge ends at the entities its
payload names (`cause_entity`, `effect_entity`), and an explained outcome `concerns` what it is `about`.
"""

from __future__ import annotations

from typing import Final

from eventloom.schemas.catalogue import (
    CausalEdgeGenerated,
    InferenceEdgeContradicted,
    InferenceEdgeGenerated,
    InferenceEdgeRetracted,
    OutcomeExplained,
    SubjectRef,
)
from projectors.graph.extraction import Extraction, Extractor, compact, typed
from readmodels.graph.model import EntityRef

CAUSE: Final = "cause"
OUTCOME: Final = "outcome"
CONCERNS: Final = "concerns"
"""From an explained outcome or a decision to each entity it is `about`."""


def _edge_name(edge_id: str | None, source: str | None, relation_type: str | None, target: str | None) -> str:
    return edge_id if edge_id is not None else f"{source} -{relation_type}-> {target}"


def _named(subject: SubjectRef | None, name: str) -> EntityRef:
    """An inferred edge's end: the typed entity when the payload names it, else found by name alone."""
    return EntityRef(name) if subject is None else EntityRef(subject.name, subject.entity_type)


def edge_generated(x: Extraction, p: InferenceEdgeGenerated) -> None:
    x.relation(
        _named(p.source_entity, p.source),
        _named(p.target_entity, p.target),
        p.relation_type,
        evidence=p.evidence,
        inferred=True,
        confidence=p.confidence,
        inference_method=p.method,
        edge_id=p.edge_id,
        review_status=p.review_status,
        derived_from_event_seq=p.source_event_seq,
        derived_from_event_hash=p.source_event_hash,
    )
    x.summary = f"inferred {p.source} -{p.relation_type}-> {p.target} ({p.confidence:.2f}, {p.method})"


def edge_contradicted(x: Extraction, p: InferenceEdgeContradicted) -> None:
    x.summary = f"contradicts {_edge_name(p.edge_id, p.source, p.relation_type, p.target)}: {p.reason}"


def edge_retracted(x: Extraction, p: InferenceEdgeRetracted) -> None:
    x.retract(
        edge_id=p.edge_id, source=p.source, target=p.target, relation_type=p.relation_type, reason=p.reason
    )
    x.summary = f"retracted {_edge_name(p.edge_id, p.source, p.relation_type, p.target)}: {p.reason}"


def _end(subject: SubjectRef | None, text: str, fallback_type: str) -> EntityRef:
    """A causal edge's end: the entity it is about when the payload names one (`cause_entity`,
    `effect_entity`, set by the `causal` producer from the cited event), else an entity named by the text."""
    return EntityRef(text, fallback_type) if subject is None else EntityRef(subject.name, subject.entity_type)


def causal_edge_generated(x: Extraction, p: CausalEdgeGenerated) -> None:
    relation_type = f"causal_{p.taxonomy}"
    properties = compact(
        {
            "taxonomy": p.taxonomy,
            "declared_relation_type": p.relation_type if p.relation_type != relation_type else None,
        }
    )
    x.relation(
        _end(p.cause_entity, p.cause, CAUSE),
        _end(p.effect_entity, p.effect, OUTCOME),
        relation_type,
        properties=properties,
        evidence=p.evidence,
        inferred=True,
        confidence=p.confidence,
        inference_method=p.method,
        edge_id=p.edge_id,
        review_status=p.review_status,
        authority_status=p.authority_status,
        derived_from_event_seq=p.source_event_seq,
        derived_from_event_hash=p.source_event_hash,
    )
    x.summary = f"causal ({p.taxonomy}, {p.review_status}): {p.cause} -> {p.effect}"


def outcome_explained(x: Extraction, p: OutcomeExplained) -> None:
    properties = {
        "taxonomy": p.taxonomy,
        "confidence": p.confidence,
        "cause_event_seq": p.cause_event_seq,
        "cause_event_hash": p.cause_event_hash,
    }
    me = x.entity(p.outcome, OUTCOME, p.explanation, compact(properties))
    if p.cause:
        x.relation(me, EntityRef(p.cause, CAUSE), "explained_by", properties={"taxonomy": p.taxonomy})
    for subject in p.about:
        x.relation(me, EntityRef(subject.name, subject.entity_type), CONCERNS)
    x.summary = f"outcome explained ({p.taxonomy}): {p.outcome}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "inference.edge.generated": typed(InferenceEdgeGenerated, edge_generated),
    "inference.edge.contradicted": typed(InferenceEdgeContradicted, edge_contradicted),
    "inference.edge.retracted": typed(InferenceEdgeRetracted, edge_retracted),
    "causal.edge.generated": typed(CausalEdgeGenerated, causal_edge_generated),
    "outcome.explained": typed(OutcomeExplained, outcome_explained),
}
