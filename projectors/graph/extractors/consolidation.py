"""Extraction of consolidation: candidates, their reviews, their promotion and its retraction.

- A candidate (`consolidation.candidate.created`) is an entity of type `consolidation_candidate` named by its
  `candidate_id`, with `status` `pending`, its content as properties (`source_events` keeps its citations,
  `candidate_event` the event that proposed it) and a `concerns` relation to each entity it is `about`. A
  payload of version 1 (no type, no cited sources) gets `status` `legacy_uncited`: it can never be promoted.
- A review sets the candidate's `status` to the verdict, with `reviewer` and `rationale`.
- A promotion sets the candidate's `status` to `promoted` and asserts the consolidated memory: an entity
  whose type is the candidate's type (`episode`, `claim`, `procedure`) and whose name is the candidate's id
  (a title need not be unique; the id is, and a retraction names only the id), whose summary is the
  candidate's summary and whose `source_events` are the candidate's citations (retrieval cites them). Each
  `about` entity points to it (`consolidated_into`).
- A retraction sets the candidate's `status` to `retracted` and closes the memory's window, which closes the
  `consolidated_into` edges with it: the facts stand alone again. It names only the candidate, so it closes
  the id under each of the three memory types (the two that do not exist are left alone).
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.schemas.catalogue import (
    ConsolidationCandidateCreated,
    ConsolidationCandidateCreatedV1,
    ConsolidationCandidatePromoted,
    ConsolidationCandidateReviewed,
    ConsolidationCandidateReviewedV1,
    ConsolidationPromotionRetracted,
    SourceEvent,
)
from eventloom.schemas.registry import current_payload
from projectors.graph.extraction import Extraction, Extractor, compact, typed
from readmodels.graph.model import EntityRef, EventProjection

CANDIDATE_TYPE: Final = "consolidation_candidate"
MEMORY_TYPES: Final = ("episode", "claim", "procedure")
CONSOLIDATED_INTO: Final = "consolidated_into"
CONCERNS: Final = "concerns"


def _sources(items: list[SourceEvent]) -> list[dict[str, Any]]:
    return [{"session": s.session, "seq": s.seq, "hash": s.hash} for s in items]


def _decoded(event: Event) -> msgspec.Struct:
    try:
        return current_payload(event)
    except EventValidationError as exc:  # the registry then projects the generic entity, with the reason
        raise msgspec.ValidationError(str(exc)) from None


def _own_event(x: Extraction) -> dict[str, Any]:
    return {"session": x.event.session, "seq": x.event.seq, "hash": x.event.hash}


def candidate_created(event: Event) -> EventProjection:
    x = Extraction(event)
    p = _decoded(event)
    if isinstance(p, ConsolidationCandidateCreatedV1):
        properties: dict[str, Any] = {
            "status": "legacy_uncited",
            "method": p.method,
            "confidence": p.confidence,
            "facts": p.facts or None,
            "candidate_event": _own_event(x),
            "proposed_at": x.ts,
        }
        me = x.entity(p.candidate_id, CANDIDATE_TYPE, p.proposal, compact(properties))
        for name in p.entities:
            x.relation(me, EntityRef(name), CONCERNS)
        x.summary = f"legacy consolidation candidate {p.candidate_id} (uncited): {p.proposal}"
        return x.projection()
    assert isinstance(p, ConsolidationCandidateCreated)
    properties = {
        "status": "pending",
        "candidate_type": p.candidate_type,
        "title": p.title,
        "confidence": p.confidence,
        "method": p.method,
        "purpose": p.purpose,
        "summary_by": p.summary_by,
        "source_events": _sources(p.source_events),
        "about": [{"name": a.name, "entity_type": a.entity_type} for a in p.about] or None,
        "relations": msgspec.to_builtins(p.relations) or None,
        "candidate_event": _own_event(x),
        "proposed_at": x.ts,
    }
    me = x.entity(p.candidate_id, CANDIDATE_TYPE, p.summary, compact(properties))
    for about in p.about:
        x.relation(me, EntityRef(about.name, about.entity_type), CONCERNS)
    x.summary = f"consolidation candidate {p.candidate_id} ({p.candidate_type}, pending): {p.title}"
    return x.projection()


def candidate_reviewed(event: Event) -> EventProjection:
    x = Extraction(event)
    p = _decoded(event)
    if isinstance(p, ConsolidationCandidateReviewedV1):
        rationale = p.note
    else:
        assert isinstance(p, ConsolidationCandidateReviewed)
        rationale = p.rationale
    conflicts = getattr(p, "conflicts_with", None) or None
    properties = {"status": p.decision, "reviewer": p.reviewer, "rationale": rationale}
    x.entity(p.candidate_id, CANDIDATE_TYPE, None, {**properties, "conflicts_with": conflicts})
    x.summary = f"consolidation candidate {p.candidate_id} {p.decision} by {p.reviewer}"
    return x.projection()


def candidate_promoted(x: Extraction, p: ConsolidationCandidatePromoted) -> None:
    candidate = p.candidate_event
    x.entity(p.candidate_id, CANDIDATE_TYPE, None, {"status": "promoted", "promoted_by": p.promoted_by})
    properties = {
        "title": p.title,
        "consolidated_from": p.candidate_id,
        "source_events": _sources(p.source_events),
        "candidate_event": _sources([candidate])[0],
        "review_event": _sources([p.review_event])[0],
        "promoted_by": p.promoted_by,
    }
    memory = x.entity(p.candidate_id, p.candidate_type, p.summary, properties)
    for about in p.about:
        x.relation(EntityRef(about.name, about.entity_type), memory, CONSOLIDATED_INTO)
    x.summary = f"promoted {p.candidate_type} {p.candidate_id} by {p.promoted_by}: {p.title}"


def promotion_retracted(x: Extraction, p: ConsolidationPromotionRetracted) -> None:
    x.entity(p.candidate_id, CANDIDATE_TYPE, None, {"status": "retracted", "retracted_by": p.retracted_by})
    for memory_type in MEMORY_TYPES:
        x.invalidate_entity(p.candidate_id, memory_type, x.ts, p.reason)
    x.summary = f"retracted promotion of {p.candidate_id} by {p.retracted_by}: {p.reason}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "consolidation.candidate.created": candidate_created,
    "consolidation.candidate.reviewed": candidate_reviewed,
    "consolidation.candidate.promoted": typed(ConsolidationCandidatePromoted, candidate_promoted),
    "consolidation.promotion.retracted": typed(ConsolidationPromotionRetracted, promotion_retracted),
}
