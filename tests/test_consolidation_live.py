"""The consolidation producer through the real runtime on a real NATS: cited candidates, proposed once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from projectors.emitter import ProducerProjection
from projectors.producers._common import edge_id
from projectors.producers.consolidation import ConsolidationProducer, ConsolidationRules
from projectors.producers.consolidation.episodes import EpisodeRules
from projectors.producers.consolidation.segments import SegmentRules
from projectors.protocol import ProcessProducer
from tests.runtime_support import drained, running

pytestmark = pytest.mark.anyio
GAP_S = 0.8  # a "long pause" for the test; the default is 30 minutes
CANDIDATE = "consolidation.candidate.created"
RELATION = {"source": "auth-service", "target": "redis", "relation_type": "depends_on"}


def fast_producer(**kwargs: Any) -> ConsolidationProducer:
    rules = ConsolidationRules(episodes=EpisodeRules(segments=SegmentRules(gap_s=GAP_S)))
    return ConsolidationProducer(rules=rules, **kwargs)


async def run_until_idle(log: EventLog, producer: ProcessProducer, name: str) -> ProducerProjection:
    projection = ProducerProjection(producer, log, name=name)
    async with running(log, projection, role="producer") as runner:
        await drained(log, runner.consumer)
    return projection


async def candidates(log: EventLog) -> list[Event]:
    return [e async for e in log.events() if e.type == CANDIDATE]


async def append_all(log: EventLog, session: str, steps: list[tuple[str, dict[str, Any]]]) -> list[Event]:
    return [await log.append(session, type_, "agent", payload) for type_, payload in steps]


def command(text: str, exit_code: int = 0) -> tuple[str, dict[str, Any]]:
    return ("command.completed", {"command": text, "exit_code": exit_code})


async def append_sessions(log: EventLog) -> dict[str, list[Event]]:
    """s1: an auth-service fix, then (a topic shift) billing docs, a pause, a review and the end;
    s2: the same fact asserted again and the same build-and-test procedure succeeding again."""
    auth = await append_all(log, "s1", [
        ("session.started", {"agent": "coder", "goal": "Fix login timeouts in auth-service"}),
        ("issue.diagnosed", {"issue_id": "i1", "summary": "auth-service login timeouts: the token cache"}),
        ("decision.made", {"decision_id": "d1", "title": "Cache auth-service login tokens in redis"}),
        ("memory.fact.asserted", {"relations": [RELATION]}),
        command("git pull"),
        command("make build"),
        command("pytest tests/test_login.py"),
        ("verification.recorded", {"subject": "auth-service login timeouts fixed", "passed": True}),
    ])  # fmt: skip
    billing = await append_all(log, "s1", [
        ("task.proposed", {"task_id": "t2", "title": "Write billing invoice documentation"}),
        ("decision.made", {"decision_id": "d2", "title": "Document billing invoice export formats"}),
        ("file.edit.applied", {"path": "docs/billing-invoice.md", "change_kind": "create"}),
    ])  # fmt: skip
    await asyncio.sleep(GAP_S + 0.3)
    review = await append_all(log, "s1", [
        ("task.proposed", {"task_id": "t3", "title": "Review billing invoice documentation"}),
        ("transcript.turn", {"role": "user", "text": "Please add billing invoice examples"}),
        ("task.completed", {"task_id": "t3", "summary": "Added billing invoice examples"}),
        ("session.ended", {"reason": "done"}),
    ])  # fmt: skip
    again = await append_all(log, "s2", [
        ("memory.fact.asserted", {"relations": [{**RELATION, "source": "Auth-Service"}]}),
        command("git pull", exit_code=1),
        command("git pull"),
        command("make build"),
        command("pytest -q"),
        ("verification.recorded", {"subject": "build green", "passed": True}),
    ])  # fmt: skip
    return {"auth": auth, "billing": billing, "review": review, "s2": again}


def cited(events: list[Event]) -> list[dict[str, Any]]:
    return [{"session": e.session, "seq": e.seq, "hash": e.hash} for e in events]


async def assert_citations_hold(log: EventLog, candidate: Event) -> None:
    by_position = {(e.session, e.seq): e.hash async for e in log.events()}
    for source in candidate.payload["source_events"]:
        assert by_position[(source["session"], source["seq"])] == source["hash"]


async def test_episodes_claims_and_procedures_are_proposed_cited_and_once(log: EventLog) -> None:
    events = await append_sessions(log)
    first = await run_until_idle(log, fast_producer(), "consolidation")
    found = await candidates(log)
    by_type: dict[str, list[Event]] = {}
    for candidate in found:
        by_type.setdefault(candidate.payload["candidate_type"], []).append(candidate)
        await assert_citations_hold(log, candidate)
        sources = candidate.payload["source_events"]
        expected_id = edge_id(
            "cand",
            candidate.payload["candidate_type"],
            candidate.payload["method"],
            *(s["hash"] for s in sources),
        )
        assert candidate.payload["candidate_id"] == expected_id
        assert candidate.payload["summary_by"] == "extractive"
        assert candidate.actor == "producer:consolidation"
    assert first.emitted == len(found) == 5

    auth_episode, billing_episode, review_episode = by_type["episode"]
    assert auth_episode.payload["source_events"] == cited(events["auth"])
    assert billing_episode.payload["source_events"] == cited(events["billing"])
    assert review_episode.payload["source_events"] == cited(events["review"][:3])
    assert "auth-service" in auth_episode.payload["title"]
    assert review_episode.caused_by == [events["review"][-1].hash]  # proposed when the session ended

    (claim,) = by_type["claim"]
    assert claim.payload["source_events"] == cited([events["auth"][3], events["s2"][0]])
    assert claim.payload["relations"] == [{**RELATION, "source": "Auth-Service"}]
    assert "2 times in 2 sessions" in claim.payload["summary"]

    (procedure,) = by_type["procedure"]
    assert procedure.payload["title"] == "Procedure: git pull \u2192 make build \u2192 pytest"
    steps_s1, steps_s2 = events["auth"][4:8], events["s2"][2:6]  # the failed `git pull` is left out
    assert procedure.payload["source_events"] == cited([*steps_s1, *steps_s2])

    again = await run_until_idle(log, fast_producer(), "consolidation-replay")  # from stream seq 1
    assert again.emitted == 0
    assert [c.hash for c in await candidates(log)] == [c.hash for c in found]
