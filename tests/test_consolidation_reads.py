"""Consolidation reads on both graph backends: list by status/type/session, show with history, same_as."""

from __future__ import annotations

from typing import Any

import pytest

from eventloom.event import Event
from readmodels.graph.protocol import GraphStore
from readmodels.graph.reads import entity_versions
from readmodels.retrieval.candidates import (
    CandidateListRequest,
    CandidateRequest,
    candidate_list,
    candidate_show,
)
from readmodels.retrieval.model import QueryError
from tests import test_graph_support as support
from tests.test_graph_support import SessionLog, fact, project

pytestmark = pytest.mark.anyio
backend = support.backend
graph_store = support.graph_store
fresh_store = support.fresh_store


def _source(event: Event) -> dict[str, Any]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def _candidate(cid: str, kind: str, sources: list[Event]) -> dict[str, Any]:
    return {
        "candidate_id": cid,
        "candidate_type": kind,
        "title": f"{cid} title",
        "summary": f"{cid} summary",
        "source_events": [_source(e) for e in sources],
        "confidence": 0.8,
        "method": "test_v1",
        "purpose": "a test",
        "about": [{"name": "auth-service", "entity_type": "service"}],
    }


def story() -> SessionLog:
    log = SessionLog("s1")
    first = log.add("memory.fact.asserted", fact(("auth-service", "service", "the auth service")))
    created = log.add("consolidation.candidate.created", _candidate("c-claim", "claim", [first]))
    log.add("consolidation.candidate.created", _candidate("c-ep", "episode", [first]))
    log.add("consolidation.candidate.created", {"candidate_id": "c-old", "proposal": "merge them"})
    review = log.add(
        "consolidation.candidate.reviewed",
        {
            "candidate_id": "c-claim",
            "decision": "accepted",
            "reviewer": "alice",
            "rationale": "checked",
            "candidate_event": _source(created),
        },
    )
    promoted = {
        **{k: v for k, v in _candidate("c-claim", "claim", [first]).items() if k in PROMOTED_KEYS},
        "candidate_event": _source(created),
        "review_event": _source(review),
        "promoted_by": "alice",
    }
    log.add("consolidation.candidate.promoted", promoted)
    log.add(
        "inference.edge.generated",
        {
            "edge_id": "sa-1",
            "source": "auth-service",
            "target": "auth svc",
            "relation_type": "same_as",
            "confidence": 0.7,
            "method": "normalised_name",
            "evidence": [{"event_seq": 1, "event_hash": first.hash}],
        },
    )
    return log


PROMOTED_KEYS = {"candidate_id", "candidate_type", "title", "summary", "source_events", "about"}


async def test_list_filters_and_orders_newest_first(graph_store: GraphStore) -> None:
    await project(graph_store, story().events)
    every = await graph_store.read(candidate_list(CandidateListRequest(session="s1")))
    assert [c.candidate_id for c in every.candidates] == ["c-old", "c-ep", "c-claim"]
    statuses = {c.candidate_id: c.status for c in every.candidates}
    assert statuses == {"c-old": "legacy_uncited", "c-ep": "pending", "c-claim": "promoted"}
    pending = await graph_store.read(candidate_list(CandidateListRequest(status="pending")))
    assert [c.candidate_id for c in pending.candidates] == ["c-ep"]
    assert pending.candidates[0].promotable and pending.candidates[0].citations[0].seq == 1
    claims = await graph_store.read(candidate_list(CandidateListRequest(candidate_type="claim", limit=1)))
    assert [c.candidate_id for c in claims.candidates] == ["c-claim"]
    other = await graph_store.read(candidate_list(CandidateListRequest(session="s2")))
    assert other.candidates == [] and other.matched == 0


async def test_show_has_content_citations_and_history(graph_store: GraphStore) -> None:
    log = story()
    await project(graph_store, log.events)
    found = (await graph_store.read(candidate_show(CandidateRequest(candidate_id="c-claim")))).found
    assert found is not None and found.kind == "candidate"
    assert (found.status, found.candidate_type, found.title, found.promotable) == (
        "promoted",
        "claim",
        "c-claim title",
        False,
    )
    assert found.candidate_event.seq == 2 and [c.seq for c in found.citations] == [1]
    assert [(s.status, s.by) for s in found.history] == [
        ("pending", None),
        ("accepted", "alice"),
        ("promoted", "alice"),
    ]
    assert found.history[1].rationale == "checked"
    memory = await graph_store.read(entity_versions("s1", "c-claim", "claim"))
    assert memory[-1].summary == "c-claim summary" and memory[-1].valid_to is None
    legacy = (await graph_store.read(candidate_show(CandidateRequest(candidate_id="c-old")))).found
    assert legacy is not None and legacy.status == "legacy_uncited" and not legacy.promotable


async def test_show_finds_a_same_as_edge_and_nothing_else(graph_store: GraphStore) -> None:
    await project(graph_store, story().events)
    edge = (await graph_store.read(candidate_show(CandidateRequest(candidate_id="sa-1")))).found
    assert edge is not None and edge.kind == "same_as"
    assert (edge.status, edge.session, edge.candidate_event.seq) == ("proposed", "s1", 7)
    assert {s.name for s in edge.about} == {"auth-service", "auth svc"}
    missing = await graph_store.read(candidate_show(CandidateRequest(candidate_id="nope")))
    assert missing.found is None


def test_requests_name_the_bad_field() -> None:
    with pytest.raises(QueryError, match=r"^status:"):
        CandidateListRequest(status="maybe")
    with pytest.raises(QueryError, match=r"^candidate_type:"):
        CandidateListRequest(candidate_type="fact")
    with pytest.raises(QueryError, match=r"^limit:"):
        CandidateListRequest(limit=0)
    with pytest.raises(QueryError, match=r"^candidate_id:"):
        CandidateRequest(candidate_id=" ")
