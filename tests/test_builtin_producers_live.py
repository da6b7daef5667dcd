"""The built-in inference producers through the real runtime: citations checked against the log."""

from __future__ import annotations

import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.emitter import ProducerProjection
from projectors.plugins import load_producer
from tests.runtime_support import drained, running

pytestmark = pytest.mark.anyio


async def run_producer_until_idle(log: EventLog, settings: Settings, name: str) -> ProducerProjection:
    projection = ProducerProjection(load_producer(name, settings), log)
    async with running(log, projection, role="producer") as runner:
        await drained(log, runner.consumer)
    return projection


async def of_type(log: EventLog, session: str, event_type: str) -> list[Event]:
    return [e async for e in log.events(session) if e.type == event_type]


async def test_task_completion_citing_a_decision_yields_one_inferred_edge(
    log: EventLog, settings: Settings
) -> None:
    decision = await log.append("s", "decision.made", "agent", {"decision_id": "d1", "title": "Use NATS"})
    cited = {"decision": "Use NATS", "decision_event_seq": decision.seq, "decision_event_hash": decision.hash}
    good = await log.append("s", "task.completed", "agent", {"task_id": "t1", **cited})
    await log.append(
        "s", "task.completed", "agent", {"task_id": "t2", **cited, "decision_event_hash": "0" * 64}
    )
    await log.append(
        "s", "task.completed", "agent", {"task_id": "t3", **cited, "decision_event_seq": good.seq}
    )
    await log.append("s", "task.completed", "agent", {"task_id": "t4"})
    projection = await run_producer_until_idle(log, settings, "decision_citation")
    (edge,) = await of_type(log, "s", "inference.edge.generated")
    assert edge.caused_by == [good.hash]
    assert edge.payload["relation_type"] == "likely_implemented_decision"
    assert edge.payload["confidence"] == 0.86
    assert edge.payload["method"] == "task_completed_decision_citation_v1"
    assert projection.skipped_citations == 2  # a wrong hash; a seq holding another event


async def test_cited_outcome_yields_a_causal_edge_and_a_contradiction_a_retraction(
    log: EventLog, settings: Settings
) -> None:
    cause = await log.append("s", "command.completed", "agent", {"command": "deploy", "exit_code": 1})
    await log.append(
        "s",
        "outcome.explained",
        "agent",
        {
            "outcome": "deploy failed",
            "explanation": "missing migration",
            "taxonomy": "caused",
            "cause_event_seq": cause.seq,
            "cause_event_hash": cause.hash,
        },
    )
    await log.append(
        "s",
        "outcome.explained",
        "agent",
        {"outcome": "flaky", "explanation": "unknown", "taxonomy": "explained"},
    )
    await run_producer_until_idle(log, settings, "causal")
    (causal,) = await of_type(log, "s", "causal.edge.generated")
    assert causal.payload["relation_type"] == "causal_caused"
    assert causal.payload["review_status"] == "proposed"
    assert causal.payload["authority_status"] == "non_authoritative"

    contradiction = await log.append(
        "s",
        "inference.edge.contradicted",
        "reviewer",
        {"edge_id": causal.payload["edge_id"], "reason": "the migration was present"},
    )
    await run_producer_until_idle(log, settings, "retraction")
    (retracted,) = await of_type(log, "s", "inference.edge.retracted")
    assert retracted.payload["edge_id"] == causal.payload["edge_id"]
    assert retracted.payload["retracted_by_event_hash"] == contradiction.hash
