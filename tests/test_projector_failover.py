"""Projector failover (docs/operations.md#projector-failover): what a worker holds comes back to its consumer
after the ack wait, unless the worker says it is still at it; and two writers of one batch apply it once.

Real nats-server, real Neo4j; `ConsumerWatch` (bench/failover_watch.py) sees from the side every delivery
and every answer to it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.graph.projector import GraphProjector
from projectors.plugins import load_projector
from projectors.runner import RunnerOptions
from readmodels.backends import neo4j_store
from tests.runtime_support import drained, running
from tests.test_batched_projection import mixed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from failover_watch import ConsumerWatch, graph_state

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = [pytest.mark.anyio, pytest.mark.slow]
SESSIONS = [f"fo{n}" for n in range(10)]


@pytest.fixture
def neo4j_settings(settings: Settings, neo4j_endpoint: Neo4jEndpoint) -> Settings:
    return dataclasses.replace(
        settings,
        graph_backend="neo4j",
        embedder="hash",
        projectors="graph",
        producers="none",
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )


class SlowCounter:
    """A projector whose every batch takes longer than the ack wait (a slow read model, a big batch)."""

    name = "slow"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.applied: dict[str, list[int]] = {}

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return {s: self.applied[s][-1] for s in sessions if self.applied.get(s)}

    async def apply(self, events: Sequence[Event]) -> None:
        await asyncio.sleep(self.seconds)
        for event in events:
            self.applied.setdefault(event.session, []).append(event.seq)


async def test_a_live_worker_keeps_a_batch_slower_than_the_ack_wait(log: EventLog) -> None:
    """Takeover is governed by the ack wait, and it is short; a worker that is alive but slow keeps what it
    holds (in-progress acks), so nothing is handed to another worker and nothing is applied twice."""
    await log.append_many([r for s in SESSIONS[:2] for r in mixed(s, 30)])
    watch = ConsumerWatch(log.client, log.layout.name, "projector-slow")
    await watch.start()
    projector = SlowCounter(seconds=2.5)
    options = RunnerOptions(batch=20, fetch_timeout_s=0.2, ack_wait_s=1.0)
    async with running(log, projector, options=options) as runner:
        await drained(log, runner.consumer, timeout=40)
        assert runner.in_progress.sent > 0 and runner.in_progress.held == 0
    await asyncio.sleep(0.2)  # the last answers reach the watch
    await watch.stop()
    assert projector.applied == {s: list(range(1, 31)) for s in SESSIONS[:2]}
    assert watch.in_progress_acks() > 0
    assert watch.expired_while_alive(float("inf")) == 0  # every delivery was answered by the one it went to
    assert len(watch.deliveries) == 60


async def test_two_writers_of_one_batch_apply_it_once(neo4j_settings: Settings) -> None:
    """A live worker whose batch was handed to another anyway (a stall past the ack wait): both write the
    same events at once into the same graph; the checkpoint read in each transaction and the graph's unique
    keys let one of them win, and the other applies nothing."""
    async with neo4j_store(neo4j_settings) as store:
        await store.clear()
    async with await EventLog.open(neo4j_settings) as log:
        events = await log.append_many([r for s in SESSIONS[:3] for r in mixed(s, 60)])
    first, second = (load_projector("graph", neo4j_settings) for _ in range(2))
    assert isinstance(first, GraphProjector) and isinstance(second, GraphProjector)
    await first.open()
    await second.open()
    try:
        outcomes = await asyncio.gather(first.apply(events), second.apply(events), return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        for event in events if failed else []:  # the loser's runner applies one by one: all skipped
            await second.apply([event])
            await first.apply([event])
    finally:
        await first.close()
        await second.close()
    state = await graph_state(neo4j_settings, dict.fromkeys(SESSIONS[:3], 60))
    assert state["events"] == 180 and state["lost"] == 0 and state["applied_twice"] == 0
    assert state["checkpoints_at_last_seq"]
