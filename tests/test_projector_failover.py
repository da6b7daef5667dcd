"""Projector failover (docs/operations.md#projector-failover): one worker of a consumer applies, holding its
lease, the others stand by; a standby takes over a killed or stalled holder, and a holder that lost its
lease writes nothing more. Also: what a live worker holds stays its own however slow the batch, and two
writers of one batch apply it once.

Real nats-server, real Neo4j, real `eventloom projector run graph` processes; `ConsumerWatch`
(bench/consumer_watch.py) sees from the side every pull, delivery and answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
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
from tests.lease_worker import Recorder, leased_runner, read_lines
from tests.runtime_support import drained, running
from tests.test_batched_projection import mixed

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from consumer_watch import ConsumerWatch
from failover import (
    Workers,
    graph_state,
    kill_mid_batch,
    rebuilt_fingerprint,
    wait_for_holder,
    wait_for_line,
)

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


LEASE_S = 1.0
ACK_WAIT_S = 2.0


async def test_kill_9_of_the_active_graph_worker_mid_batch(neo4j_settings: Settings, tmp_path: Path) -> None:
    """Two `eventloom projector run graph` workers: the first holds the lease and alone pulls. Its host is
    lost while it holds delivered, unacknowledged events (stopped, so this host's standby cannot see its
    pid gone and must wait out the lease, as one on another host would; then `kill -9`). The standby takes
    the lease over and carries on within the lease (plus slack), and the graph ends equal to a clean
    rebuild, nothing lost, nothing applied twice."""
    settings = dataclasses.replace(neo4j_settings, projector_lease_s=LEASE_S, projector_ack_wait_s=ACK_WAIT_S)
    async with neo4j_store(settings) as store:
        await store.clear()
    workers = Workers(settings, tmp_path / "workers")
    workers.workdir.mkdir()
    async with await EventLog.open(settings) as log:
        try:
            first, _ = workers.join()
            await wait_for_holder(log.client, first.pid, 60)
            result = await kill_mid_batch(log, workers, [f"fo{n}" for n in range(4)], 100, lost_host=True)
        finally:
            exits = workers.stop_all()
        state = await graph_state(settings, result["expected"])
        rebuilt = await rebuilt_fingerprint(log)
    assert result["pullers_before_kill"] == 1  # the standby pulled nothing while the other was active
    assert result["held"] > 0  # caught mid-batch
    assert result["taken_over"] == result["held"] and result["recovered_s"] is not None
    bound = LEASE_S + ACK_WAIT_S + 3.0  # the documented worst case, plus slack for 2 busy cores
    assert result["takeover_s"] is not None and LEASE_S / 2 <= result["takeover_s"] <= bound, result  # waited
    assert exits == [0]
    assert state["events"] == 400 and state["lost"] == 0 and state["applied_twice"] == 0
    assert state["checkpoints_at_last_seq"]
    assert state["fingerprint"] == rebuilt


class GatedRecorder(Recorder):
    """The in-test standby's recorder: it applies only once `gate` opens, so the stalled holder, resumed
    meanwhile, finds the events it held still unapplied, and only its lease stops it writing them."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = asyncio.Event()

    async def apply(self, events: Sequence[Event]) -> None:
        await self.gate.wait()
        await super().apply(events)


async def test_a_stalled_holder_is_fenced_and_writes_nothing_after_it_resumes(
    log: EventLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The holder (a process of its own) is stopped (SIGSTOP) while it waits for events; what is appended
    then is delivered to it. A standby takes the lease over after `lease_s` and takes those events; the
    holder, resumed (SIGCONT) with them in hand and unapplied anywhere, is fenced: it writes none of them,
    acknowledges none, and stands by."""
    caplog.set_level(logging.INFO, logger="projectors.runner")
    record, worker_log = tmp_path / "applied.txt", tmp_path / "holder.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")} | log.settings.to_env()
    command = [sys.executable, "-m", "tests.lease_worker", str(record), str(LEASE_S)]
    with open(worker_log, "ab") as out:
        holder = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    recorder = GatedRecorder(record)
    standby = leased_runner(log, recorder, LEASE_S)
    stop = asyncio.Event()
    await wait_for_holder(log.client, holder.pid, 60, consumer="projector-recorded")
    standing = asyncio.create_task(standby.run(stop))
    try:
        await log.append_many([r for s in ("st1", "st2") for r in mixed(s, 20)])
        await _until(lambda: len(read_lines(record)) == 40, "the holder applies the first events")
        assert standby.lease is not None and standby.lease.role == "standby"
        holder.send_signal(signal.SIGSTOP)
        await log.append_many([r for s in ("st1", "st2") for r in mixed(s, 20)])  # delivered to the holder
        await _until(lambda: standby.lease is not None and standby.lease.held, "the standby takes over")
        await _until(lambda: standby.stats.batches > 0, "the standby has the held events in hand")
        assert "taking over 40 unacknowledged event(s)" in caplog.text  # the stalled holder had them
        holder.send_signal(signal.SIGCONT)
        await wait_for_line(worker_log, "fenced", 15)
        await asyncio.sleep(0.5)  # a holder that ignored its fence would be writing now
        assert {pid for pid, _, _ in read_lines(record)} == {holder.pid}
        recorder.gate.set()
        await drained(log, "projector-recorded", timeout=30)
        await wait_for_line(worker_log, "standing by, held by", 5)
    finally:
        stop.set()
        await standing
        holder.send_signal(signal.SIGCONT)
        holder.send_signal(signal.SIGINT)
        holder.wait(15)
    rows = read_lines(record)
    by_holder = sorted((s, q) for p, s, q in rows if p == holder.pid)
    assert by_holder == [(s, q) for s in ("st1", "st2") for q in range(1, 21)]  # nothing after it resumed
    by_standby = sorted((s, q) for p, s, q in rows if p == os.getpid())
    assert by_standby == [(s, q) for s in ("st1", "st2") for q in range(21, 41)]  # each event once


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out: {what}")
        await asyncio.sleep(0.05)
