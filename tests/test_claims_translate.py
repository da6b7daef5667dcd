"""From events to the claims model's operations (gateway/packs/claims/translate.py): pure, no store."""

from __future__ import annotations

from typing import Any

from gateway.packs.claims.model import (
    AcceptClaim,
    EntityName,
    RecordClaim,
    RecordContradiction,
    RecordObservation,
    RelateEntities,
)
from gateway.packs.claims.producer import contradiction_id
from gateway.packs.claims.translate import changes
from tests.test_graph_support import SessionLog, ts


def cite(event: Any) -> dict[str, Any]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def test_an_observation_with_extracted_mentions_and_triples() -> None:
    log = SessionLog("t1")
    event = log.add(
        "claims.observation.recorded",
        {
            "content": 'Alice works at Acme. "Project X" matters.',
            "source": "chat",
            "observed_at": "2025-05-01T11:00:00+02:00",
        },
    )
    observation, relation = changes(event).operations
    assert isinstance(observation, RecordObservation) and isinstance(relation, RelateEntities)
    assert (observation.key, observation.observed_at, observation.extracted_by) == (
        "t1/1",
        "2025-05-01T09:00:00.000000Z",
        "deterministic",
    )
    assert observation.mentions == [
        EntityName("alice", "Alice"),
        EntityName("acme", "Acme"),
        EntityName("project x", "Project X"),
    ]
    assert (relation.source.key, relation.relation, relation.target.key, relation.derived, relation.via) == (
        "alice",
        "WORKS_AT",
        "acme",
        False,
        "t1/1",
    )
    assert relation.cite == observation.cite and observation.cite.ts == ts(1)


def test_given_mentions_and_triples_are_kept_with_the_triples_ends() -> None:
    event = SessionLog("t1").add(
        "claims.observation.recorded",
        {
            "content": "whatever the text says",
            "source": "chat",
            "mentions": ["Bob", "bob"],
            "triples": [{"subject": "Bob", "predicate": "KNOWS", "object": "Carol"}],
            "extracted_by": "llm:small",
        },
    )
    observation = changes(event).operations[0]
    assert isinstance(observation, RecordObservation)
    assert (observation.observed_at, observation.extracted_by) == (event.ts, "llm:small")
    assert observation.mentions == [EntityName("bob", "Bob"), EntityName("carol", "Carol")]


def test_claims_resolutions_and_acceptances() -> None:
    log = SessionLog("t1")
    seen = log.add(
        "claims.observation.recorded", {"content": "x", "source": "s", "mentions": [], "triples": []}
    )
    claim = {
        "subject": "The Alice",
        "predicate": "LIVES_IN",
        "object": "Paris",
        "confidence": 0.5,
        "source_agent": "a",
    }
    first = log.add("claims.claim.asserted", {**claim, "basis": [cite(seen), cite(seen)]})
    settled = log.add(
        "claims.claim.resolved",
        {**claim, "confidence": 0.9, "basis": [cite(seen)], "supersedes": [cite(first)]},
    )
    accepted = log.add("claims.claim.accepted", {"claim": cite(first), "reviewer": "carol"})
    recorded = changes(first).operations[0]
    assert isinstance(recorded, RecordClaim)
    assert (recorded.kind, recorded.subject, recorded.basis, recorded.supersedes, recorded.asserted_at) == (
        "claim",
        EntityName("alice", "The Alice"),
        ["t1/1"],
        [],
        first.ts,
    )
    resolution = changes(settled).operations[0]
    assert isinstance(resolution, RecordClaim) and (resolution.kind, resolution.supersedes) == (
        "resolution",
        ["t1/2"],
    )
    (acceptance,) = changes(accepted).operations
    assert isinstance(acceptance, AcceptClaim) and (acceptance.claim, acceptance.reviewer) == (
        "t1/2",
        "carol",
    )


def test_a_claim_citing_itself_is_not_linked_to_itself() -> None:
    log = SessionLog("t1")
    seen = log.add("claims.observation.recorded", {"content": "x", "source": "s"})
    payload = {"subject": "A", "predicate": "IS", "object": "B", "confidence": 0.5, "source_agent": "a"}
    itself = {"session": "t1", "seq": 2, "hash": "0" * 64}
    event = log.add("claims.claim.asserted", {**payload, "basis": [cite(seen), itself]})
    recorded = changes(event).operations[0]
    assert isinstance(recorded, RecordClaim) and recorded.basis == ["t1/1"]


def test_contradictions_between_claims_only() -> None:
    log = SessionLog("t1")
    edge = {"relation_type": "contradicts", "confidence": 0.7, "method": "claims.contradiction"}
    inferred = log.add("inference.edge.generated", {**edge, "source": "t1/2", "target": "s2/9"})
    (contradiction,) = changes(inferred).operations
    assert isinstance(contradiction, RecordContradiction)
    assert (contradiction.first, contradiction.second, contradiction.trust, contradiction.edge_id) == (
        "t1/2",
        "s2/9",
        0.7,
        contradiction_id("s2/9", "t1/2"),
    )
    named = log.add(
        "inference.edge.generated", {**edge, "source": "t1/2", "target": "s2/9", "edge_id": "e-1"}
    )
    assert changes(named).operations[0].edge_id == "e-1"  # type: ignore[union-attr]
    for other in (
        {**edge, "source": "alice", "target": "bob"},  # not claims: the graph's business
        {**edge, "source": "t1/2", "target": "t1/2"},
        {**edge, "relation_type": "supports", "source": "t1/2", "target": "s2/9"},
    ):
        assert changes(log.add("inference.edge.generated", other)).operations == []


def test_what_the_model_does_not_read_or_cannot_read_projects_nothing() -> None:
    log = SessionLog("t1")
    for type, payload in (
        ("decision.recorded", {"decision": "ship it"}),
        ("claims.claim.asserted", {"subject": "A"}),  # fits no schema
        (
            "claims.claim.asserted",
            {
                "subject": "...",
                "predicate": "IS",
                "object": "B",
                "confidence": 0.5,
                "source_agent": "a",
                "basis": [{"session": "t1", "seq": 1, "hash": "0" * 64}],
            },
        ),
        ("claims.observation.recorded", {"content": "x", "source": "s", "mentions": ["?!"]}),  # names nothing
    ):
        event = log.add(type, payload)
        assert changes(event).operations == [], payload
        assert (changes(event).session, changes(event).seq) == ("t1", event.seq)
