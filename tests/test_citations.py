"""What derived events cite, the check every consumer runs on it, and payload versions told apart."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventloom import tail, trust
from eventloom.citations import UNCITED, CitationChecker, KnownHashes, cited_events
from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.schemas import decode_payload, validate_payload
from eventloom.schemas.catalogue import (
    CausalEdgeGenerated,
    CausalEdgeGeneratedV1,
    ConsolidationCandidateCreated,
    ConsolidationCandidateCreatedV1,
    ConsolidationCandidateReviewed,
    ConsolidationCandidateReviewedV1,
)
from eventloom.trust import EventVerifier
from tests.test_graph_support import SessionLog

pytestmark = pytest.mark.anyio


def causal(evidence: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "cause": "deploy of v2",
        "effect": "login errors",
        "taxonomy": "caused",
        "relation_type": "causal_caused",
        "confidence": 0.7,
        "method": "test",
        "evidence": evidence,
    }


def test_a_causal_edge_without_an_event_citation_is_refused_at_append_naming_the_field() -> None:
    with pytest.raises(EventValidationError) as caught:
        validate_payload("causal.edge.generated", causal([]))
    assert caught.value.field == "payload.evidence"
    with pytest.raises(EventValidationError) as caught:
        validate_payload("causal.edge.generated", causal([{"quote": "it broke after the deploy"}]))
    assert "cite at least one event" in str(caught.value)
    minimal = causal([])
    del minimal["evidence"]
    with pytest.raises(EventValidationError) as caught:
        validate_payload("causal.edge.generated", minimal)
    assert caught.value.field == "payload.evidence"


def test_payload_versions_are_told_apart_by_the_schema_they_fit() -> None:
    old_edge = causal([])
    assert isinstance(decode_payload("causal.edge.generated", old_edge), CausalEdgeGeneratedV1)
    new_edge = causal([{"event_seq": 1, "event_hash": "a" * 64}])
    assert isinstance(decode_payload("causal.edge.generated", new_edge), CausalEdgeGenerated)
    old_candidate = {"candidate_id": "c1", "proposal": "merge a and b"}
    assert isinstance(
        decode_payload("consolidation.candidate.created", old_candidate), ConsolidationCandidateCreatedV1
    )
    new_candidate = {
        "candidate_id": "c1",
        "candidate_type": "episode",
        "title": "t",
        "summary": "s",
        "source_events": [{"session": "s1", "seq": 1, "hash": "b" * 64}],
        "confidence": 0.5,
        "method": "m",
        "purpose": "p",
    }
    assert isinstance(
        decode_payload("consolidation.candidate.created", new_candidate), ConsolidationCandidateCreated
    )
    old_review = {"candidate_id": "c1", "decision": "accepted", "reviewer": "r", "note": "ok"}
    assert isinstance(
        decode_payload("consolidation.candidate.reviewed", old_review), ConsolidationCandidateReviewedV1
    )
    with pytest.raises(EventValidationError):  # new appends must fit the current version
        validate_payload("consolidation.candidate.reviewed", old_review)
    review = {"candidate_id": "c1", "decision": "conflicted", "reviewer": "r", "rationale": "clashes"}
    assert isinstance(
        decode_payload("consolidation.candidate.reviewed", review), ConsolidationCandidateReviewed
    )


@given(
    st.dictionaries(st.sampled_from(["cause", "effect", "evidence", "taxonomy", "x"]), st.from_type(object))
)
def test_decoding_any_payload_either_fits_a_version_or_names_the_field(payload: dict[str, Any]) -> None:
    try:
        decode_payload("causal.edge.generated", payload)
    except EventValidationError as exc:
        assert exc.field.startswith("payload")


def lookup_in(events: list[Event]) -> Any:
    hashes = {(e.session, e.seq): e.hash for e in events}

    async def lookup(session: str, seq: int) -> str | None:
        return hashes.get((session, seq))

    return lookup


async def test_the_checker_refuses_a_missing_event_a_wrong_hash_and_a_forward_citation() -> None:
    log = SessionLog("s1")
    cause = log.add("decision.made", {"decision_id": "d1", "title": "ship v2"})
    good = log.add("causal.edge.generated", causal([{"event_seq": cause.seq, "event_hash": cause.hash}]))
    missing = log.add(
        "causal.edge.generated", causal([{"session": "ghost", "event_seq": 3, "event_hash": cause.hash}])
    )
    wrong = log.add("causal.edge.generated", causal([{"event_seq": cause.seq, "event_hash": "f" * 64}]))
    forward = log.add("causal.edge.generated", causal([{"event_seq": 50, "event_hash": cause.hash}]))
    elsewhere = log.add(
        "causal.edge.generated",
        causal([{"session": "other", "event_seq": 1, "event_hash": cause.hash}]),
    )
    legacy = log.add("causal.edge.generated", causal([{"quote": "no event at all"}]))
    checker = CitationChecker(lookup_in(log.events))
    assert [c.seq for c in cited_events(good)] == [cause.seq]
    assert await checker.problem(good) is None
    assert "session ghost has no event 3" in (await checker.problem(missing) or "")
    assert "has hash" in (await checker.problem(wrong) or "")
    assert "not before this event's own seq" in (await checker.problem(forward) or "")
    assert "session other has no event 1" in (await checker.problem(elsewhere) or "")
    refusal = await checker.problem(legacy) or ""
    assert refusal.startswith(UNCITED) and "cites none" in refusal


async def test_the_checker_remembers_events_it_saw_and_looks_up_the_rest_once() -> None:
    log = SessionLog("s1")
    cause = log.add("decision.made", {"decision_id": "d1", "title": "ship v2"})
    edges = [
        log.add("causal.edge.generated", causal([{"event_seq": cause.seq, "event_hash": cause.hash}]))
        for _ in range(3)
    ]
    calls: list[tuple[str, int]] = []
    inner = lookup_in(log.events)

    async def counting(session: str, seq: int) -> str | None:
        calls.append((session, seq))
        return str(await inner(session, seq))

    checker = CitationChecker(counting)
    for edge in edges:
        assert await checker.problem(edge) is None
    assert calls == [("s1", 1)]
    seen = CitationChecker(counting)
    seen.saw(cause)
    assert await seen.problem(edges[0]) is None
    assert calls == [("s1", 1)]


async def test_checkers_sharing_known_hashes_look_each_event_up_once_between_them() -> None:
    """A process's consumers share one `KnownHashes`: what one saw or read, the others do not read again."""
    log = SessionLog("s1")
    cause = log.add("decision.made", {"decision_id": "d1", "title": "ship v2"})
    other = log.add("decision.made", {"decision_id": "d2", "title": "ship v3"})
    edge = log.add(
        "causal.edge.generated",
        causal([{"event_seq": s.seq, "event_hash": s.hash} for s in (cause, other)]),
    )
    calls: list[tuple[str, int]] = []
    inner = lookup_in(log.events)

    async def counting(session: str, seq: int) -> str | None:
        calls.append((session, seq))
        found: str | None = await inner(session, seq)
        return found

    shared = KnownHashes()
    first, second = CitationChecker(counting, shared), CitationChecker(counting, shared)
    first.saw(cause)
    assert await first.problem(edge) is None and calls == [("s1", 2)]
    assert await second.problem(edge) is None and calls == [("s1", 2)]
    assert shared.recall("s1", 1) == cause.hash and len(shared) == 2


def test_known_hashes_drop_the_least_recently_used_past_their_limit() -> None:
    known = KnownHashes(limit=2)
    hashes = {seq: f"{seq:064x}" for seq in (1, 2, 3)}
    known.remember("s", 1, hashes[1])
    known.remember("s", 2, hashes[2])
    assert known.recall("s", 1) == hashes[1]  # 1 is now the most recently used
    known.remember("s", 3, hashes[3])
    assert [known.recall("s", seq) for seq in (1, 2, 3)] == [hashes[1], None, hashes[3]]
    known.remember("s", 4, "not a hash")  # no event has it: not remembered, nothing dropped
    assert len(known) == 2 and known.recall("s", 4) is None


async def test_verifiers_sharing_known_hashes_anchor_a_session_without_reading_the_stream(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second consumer to meet a session mid-way takes its predecessor from what the first verified,
    instead of reading it from the stream (after a restart every consumer meets every session so)."""
    events = await log.append_many(
        [AppendRequest(session="s", type="note.added", actor="t", payload={"n": n}) for n in range(4)]
    )
    reads: list[tuple[str, int]] = []
    read = tail.event_by_seq

    async def counting(client: Any, layout: Any, session: str, seq: int, *rest: Any) -> Any:
        reads.append((session, seq))
        return await read(client, layout, session, seq, *rest)

    monkeypatch.setattr(trust, "event_by_seq", counting)  # as the verifier imported it
    shared = KnownHashes()
    first, second = (
        EventVerifier(KeyStore(log.settings.data_dir), log.client, log.layout, shared) for _ in "12"
    )
    await first.open()
    await second.open()
    try:
        assert await first.verify(events[1:3]) == [None, None] and reads == [("s", 1)]
        assert await second.verify(events[3:]) == [None] and reads == [("s", 1)]
    finally:
        first.close()
        second.close()
