"""The claims pack's contradiction producer: the incompatibility rule, the edge it derives, and its state
(a redelivered claim derives the same edges; a pair is derived once, whichever claim comes second)."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventloom.citations import CitationChecker
from eventloom.event import Event
from eventloom.schemas import validate_payload
from gateway.packs.claims.producer import (
    METHOD,
    MULTI_VALUED,
    ContradictionProducer,
    HeldClaim,
    contradiction_id,
    incompatible,
)
from projectors.plugins import PRODUCERS_GROUP, available
from tests.causal_support import ListLogView, MemoryState

pytestmark = pytest.mark.anyio
OBSERVATION = {"session": "obs", "seq": 1, "hash": "a" * 64}


def claim_event(
    session: str,
    seq: int,
    obj: str,
    *,
    subject: str = "Alice",
    predicate: str = "LIVES_IN",
    confidence: float = 0.7,
    negated: bool = False,
    supersedes: list[dict[str, Any]] | None = None,
) -> Event:
    payload: dict[str, Any] = {
        "subject": subject,
        "predicate": predicate,
        "object": obj,
        "confidence": confidence,
        "source_agent": "agent:x",
        "basis": [OBSERVATION],
        "negated": negated,
    }
    kind = "claims.claim.asserted"
    if supersedes is not None:
        payload["supersedes"], kind = supersedes, "claims.claim.resolved"
    digest = hashlib.sha256(f"{session}:{seq}:{payload}".encode()).hexdigest()
    return Event(
        v=1, session=session, seq=seq, ts="2026-01-01T00:00:00.000000Z", type=kind, actor="agent:x",
        payload=payload, caused_by=[], prev_hash=None, hash=digest, sig="", key_id="0" * 16,
    )  # fmt: skip


def source(event: Event) -> dict[str, Any]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def held(obj: str, *, seq: int = 1, negated: bool = False, supersedes: tuple[str, ...] = ()) -> HeldClaim:
    return HeldClaim("s", seq, f"{seq:064x}", obj, negated, 0.5, supersedes)


async def derived_edges(events: list[Event], view: ListLogView | None = None) -> list[dict[str, Any]]:
    """Every edge the producer derives, given `events` one by one in this order."""
    view = view or ListLogView(events)
    producer = ContradictionProducer()
    return [d.payload for event in events for d in await producer.process(event, view)]


def test_the_entry_point_names_the_producer() -> None:
    entry = available(PRODUCERS_GROUP)["claims_contradictions"]
    assert entry.load()(None).name == "claims_contradictions"


@pytest.mark.parametrize(
    ("new", "old", "predicate", "expected"),
    [
        (held("paris", seq=2), held("london"), "LIVES_IN", True),
        (held("paris", seq=2), held("paris, france"), "LIVES_IN", False),  # one's words hold the other's
        (held("paris", seq=2), held("paris"), "LIVES_IN", False),
        (held("paris", seq=2, negated=True), held("paris"), "LIVES_IN", True),
        (held("paris", seq=2, negated=True), held("london"), "LIVES_IN", False),
        (held("paris", seq=2, negated=True), held("london", negated=True), "LIVES_IN", False),
        (held("bob", seq=2), held("carol"), "KNOWS", False),  # multi-valued
        (held("bob", seq=2, negated=True), held("bob"), "KNOWS", True),
        (held("paris", seq=2, supersedes=("s/1",)), held("london"), "LIVES_IN", False),  # it settles it
        (held("paris"), held("london"), "LIVES_IN", False),  # the same claim (same key)
    ],
)
def test_the_incompatibility_rule(new: HeldClaim, old: HeldClaim, predicate: str, expected: bool) -> None:
    assert incompatible(new, old, predicate) is expected


WORDS = st.lists(
    st.sampled_from(["paris", "london", "france", "new", "york", "city"]), min_size=1, max_size=3
)
CLAIMS = st.builds(
    lambda words, negated, seq: held(" ".join(words), seq=seq, negated=negated),
    WORDS,
    st.booleans(),
    st.integers(1, 5),
)
PREDICATES = st.sampled_from(["LIVES_IN", "BORN_IN", *sorted(MULTI_VALUED)[:3]])


@given(CLAIMS, CLAIMS, PREDICATES)
def test_incompatibility_is_symmetric_and_never_between_a_claim_and_itself(
    a: HeldClaim, b: HeldClaim, predicate: str
) -> None:
    assert incompatible(a, b, predicate) == incompatible(b, a, predicate)
    assert not incompatible(a, a, predicate)
    if a.negated and b.negated:
        assert not incompatible(a, b, predicate)
    if a.negated != b.negated and a.key != b.key:
        assert incompatible(a, b, predicate) == (a.object_key == b.object_key)
    if predicate in MULTI_VALUED and a.negated == b.negated:
        assert not incompatible(a, b, predicate)


@given(CLAIMS, CLAIMS, PREDICATES)
def test_a_resolution_never_contradicts_what_it_supersedes(
    a: HeldClaim, b: HeldClaim, predicate: str
) -> None:
    settling = msgspec.structs.replace(a, supersedes=(b.key,))
    assert not incompatible(settling, b, predicate)
    assert not incompatible(b, settling, predicate)


async def test_a_conflicting_claim_derives_one_cited_edge_with_the_lower_confidence_as_trust() -> None:
    paris = claim_event("s1", 2, "Paris", confidence=0.9)
    london = claim_event("s2", 3, "London", confidence=0.6)
    france = claim_event("s2", 4, "Paris, France")
    other = claim_event("s2", 5, "Berlin", subject="Bob")
    edges = await derived_edges([paris, london, france, other])
    assert len(edges) == 2  # London against Paris, then Paris France against London
    edge = edges[0]
    assert edge["source"] == "s2/3" and edge["target"] == "s1/2"
    assert edge["relation_type"] == "contradicts" and edge["method"] == METHOD
    assert edge["confidence"] == 0.6
    assert edge["edge_id"] == contradiction_id("s1/2", "s2/3") == contradiction_id("s2/3", "s1/2")
    assert [(e["session"], e["event_seq"], e["event_hash"]) for e in edge["evidence"]] == [
        ("s2", 3, london.hash),
        ("s1", 2, paris.hash),
    ]
    assert (edges[1]["source"], edges[1]["target"]) == ("s2/4", "s2/3")
    validate_payload("inference.edge.generated", edge)  # a valid payload of its type


async def test_the_edge_requires_both_claims_and_its_citations_hold_against_the_log() -> None:
    paris, london = claim_event("s1", 2, "Paris"), claim_event("s2", 3, "London")
    [derived] = await ContradictionProducer().process(london, await _seen(paris))
    assert [(r.session, r.seq, r.hash) for r in derived.requires] == [
        ("s2", 3, london.hash),
        ("s1", 2, paris.hash),
    ]
    hashes = {("s1", 2): paris.hash, ("s2", 3): london.hash}

    async def lookup(session: str, seq: int) -> str | None:
        return hashes.get((session, seq))

    edge = Event(
        v=1, session="s2", seq=4, ts=london.ts, type=derived.type, actor="producer", payload=derived.payload,
        caused_by=[london.hash], prev_hash=None, hash="f" * 64, sig="", key_id="0" * 16,
    )  # fmt: skip
    assert await CitationChecker(lookup).problem(edge) is None


async def _seen(*events: Event) -> ListLogView:
    """A view whose state already holds `events` (processed before)."""
    view = ListLogView(list(events))
    for event in events:
        await ContradictionProducer().process(event, view)
    return view


async def test_a_redelivered_claim_derives_the_same_edges_and_a_pair_comes_once_in_any_order() -> None:
    paris, london = claim_event("s1", 2, "Paris"), claim_event("s2", 3, "London")
    view = ListLogView([paris, london])
    producer = ContradictionProducer()
    assert await producer.process(paris, view) == []
    first = await producer.process(london, view)
    assert await producer.process(london, view) == first  # redelivery
    assert await producer.process(paris, view) == []  # redelivery of the earlier one: no second edge
    reversed_edges = await derived_edges([london, paris])
    assert [e["edge_id"] for e in reversed_edges] == [first[0].payload["edge_id"]]


async def test_a_resolution_contradicts_only_what_it_does_not_settle() -> None:
    paris, london, berlin = (
        claim_event(f"s{i}", i, city) for i, city in enumerate(["Paris", "London", "Berlin"], 1)
    )
    settles = claim_event("s4", 4, "Rome", supersedes=[source(paris), source(london)])
    edges = await derived_edges([paris, london, berlin, settles])
    pairs = {(e["source"], e["target"]) for e in edges}
    assert ("s4/4", "s3/3") in pairs
    assert not {("s4/4", "s1/1"), ("s4/4", "s2/2")} & pairs


async def test_claims_about_the_same_entity_spelled_differently_are_compared() -> None:
    one = claim_event("s1", 1, "Paris", subject="Alice Smith")
    two = claim_event("s1", 2, "London", subject="  alice   SMITH.")
    negated = claim_event("s1", 3, "the London", subject="Alice Smith", negated=True)
    edges = await derived_edges([one, two, negated])
    assert {(e["source"], e["target"]) for e in edges} == {("s1/2", "s1/1"), ("s1/3", "s1/2")}


async def test_other_events_and_claims_naming_no_entity_derive_nothing() -> None:
    odd = claim_event("s1", 1, "...")
    assert await derived_edges([odd, claim_event("s1", 2, "Paris")]) == []
    note = msgspec.structs.replace(odd, type="note.added", payload={"text": "hi"})
    view = ListLogView([note])
    assert await ContradictionProducer().process(note, view) == []
    assert isinstance(view.state, MemoryState) and not view.state.values
