"""Graph extraction of consolidation: candidate statuses by payload version, promotion and retraction."""

from __future__ import annotations

from typing import Any

from eventloom.event import Event
from projectors.graph.registry import extract
from readmodels.graph.model import EntityAssertion, EntityInvalidation, RelationAssertion
from tests.test_event_types import EXAMPLES
from tests.test_graph_support import SessionLog

CANDIDATE = EXAMPLES["consolidation.candidate.created"]


def _one(event_type: str, payload: dict[str, Any]) -> Event:
    return SessionLog("s2").add(event_type, payload)


def _entities(event: Event) -> dict[str, EntityAssertion]:
    return {f"{op.entity_type}:{op.name}": op for op in extract(event).ops if isinstance(op, EntityAssertion)}


def test_a_v2_candidate_is_pending_with_its_content_and_citations() -> None:
    event = _one("consolidation.candidate.created", CANDIDATE)
    candidate = _entities(event)["consolidation_candidate:cand-claim-5f0c"]
    assert candidate.summary == CANDIDATE["summary"]
    props = candidate.properties
    assert props["status"] == "pending"
    assert (props["candidate_type"], props["title"], props["method"]) == (
        "claim",
        CANDIDATE["title"],
        "claim_repeated_v1",
    )
    assert (props["confidence"], props["purpose"], props["summary_by"]) == (
        0.9,
        CANDIDATE["purpose"],
        "extractive",
    )
    assert props["source_events"] == CANDIDATE["source_events"]
    assert props["candidate_event"] == {"session": "s2", "seq": 1, "hash": event.hash}
    assert props["proposed_at"] == event.ts


def test_a_v1_candidate_is_legacy_uncited() -> None:
    payload = {"candidate_id": "old-1", "proposal": "merge a and b", "entities": ["a"], "method": "m"}
    ops = extract(_one("consolidation.candidate.created", payload)).ops
    candidate = next(op for op in ops if isinstance(op, EntityAssertion))
    assert candidate.properties["status"] == "legacy_uncited"
    assert candidate.summary == "merge a and b"
    assert any(isinstance(op, RelationAssertion) and op.relation_type == "concerns" for op in ops)


def test_reviews_of_both_versions_set_the_verdict() -> None:
    v2 = EXAMPLES["consolidation.candidate.reviewed"]
    props = _entities(_one("consolidation.candidate.reviewed", v2))[
        "consolidation_candidate:cand-claim-5f0c"
    ].properties
    assert (props["status"], props["reviewer"], props["rationale"]) == ("accepted", "alice", v2["rationale"])
    v1 = {"candidate_id": "old-1", "decision": "deferred", "reviewer": "bob", "note": "later"}
    props = _entities(_one("consolidation.candidate.reviewed", v1))[
        "consolidation_candidate:old-1"
    ].properties
    assert (props["status"], props["reviewer"], props["rationale"]) == ("deferred", "bob", "later")


def test_a_promotion_asserts_cited_memory_and_retraction_closes_it() -> None:
    promoted = EXAMPLES["consolidation.candidate.promoted"]
    entities = _entities(_one("consolidation.candidate.promoted", promoted))
    assert entities["consolidation_candidate:cand-claim-5f0c"].properties["status"] == "promoted"
    memory = entities["claim:cand-claim-5f0c"]
    assert memory.summary == promoted["summary"]
    assert memory.properties["source_events"] == promoted["source_events"]
    assert memory.properties["title"] == promoted["title"]
    retracted = extract(
        _one("consolidation.promotion.retracted", EXAMPLES["consolidation.promotion.retracted"])
    )
    closed = {op.entity_type for op in retracted.ops if isinstance(op, EntityInvalidation)}
    assert closed == {"episode", "claim", "procedure"}
    status = next(op for op in retracted.ops if isinstance(op, EntityAssertion))
    assert status.properties["status"] == "retracted"
