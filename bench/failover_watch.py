"""Watching two projector workers share one consumer, from the side, and judging a failover by what it left.

`ConsumerWatch` listens on its own NATS connection to what the server and the workers say about one durable
consumer: the workers' pull requests (each worker pulls on an inbox of its own, so a pull names its worker),
every delivery (its ack subject names the stream seq, the delivery count, and is unique) and every answer
to a delivery (an empty payload or `+ACK`, `-NAK`, `+WPI`, `+TERM`, sent to that delivery's ack subject, so
it answers that delivery and no other). A delivery does not say which worker got it, but a live worker
answers every delivery it gets: after a `kill -9` and a drain, the deliveries from before the kill that
were never answered are exactly what the dead worker held; `takeover` says when they were handed out again
and acknowledged.

`graph_state` reads what the graph read model on Neo4j shows: checkpoints and counters per session, and a
fingerprint of every graph node and relationship, to compare with a clean rebuild.
Shared by bench/failover.py and tests/test_projector_failover.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import neo4j
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from eventloom.settings import Settings
from readmodels.neo4j.driver import GRAPH_LABELS

TERMINAL = (b"+ACK", b"-NAK", b"+TERM")
ACK = b"+ACK"  # nats-py acknowledges with an empty payload, which the server takes as +ACK


@dataclass
class Delivery:
    stream_seq: int
    delivered: int  # the delivery count (1: first time)
    at: float  # time.monotonic() when the watch saw it
    answer: bytes | None = None  # the first terminal answer: +ACK, -NAK, +TERM
    answered_at: float | None = None
    in_progress: int = 0  # +WPI answers (a slow batch kept alive)


@dataclass
class ConsumerWatch:
    """Pull requests, deliveries and answers of `consumer` on `stream`, as seen by a bystander."""

    client: Client
    stream: str
    consumer: str
    workers: list[str] = field(default_factory=list)  # inbox prefixes, in the order they first pulled
    pulls: dict[str, int] = field(default_factory=dict)  # pull requests per worker
    deliveries: dict[str, Delivery] = field(default_factory=dict)  # by ack subject
    _subscriptions: list[Subscription] = field(default_factory=list)

    async def start(self) -> None:
        api = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.consumer}"
        self._subscriptions = [
            await self.client.subscribe(api, cb=self._on_pull),
            await self.client.subscribe("_INBOX.>", cb=self._on_inbox, pending_msgs_limit=-1,
                                        pending_bytes_limit=-1),
            await self.client.subscribe(f"$JS.ACK.{self.stream}.{self.consumer}.>", cb=self._on_answer,
                                        pending_msgs_limit=-1, pending_bytes_limit=-1),
        ]  # fmt: skip
        await self.client.flush()

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def _on_pull(self, message: Msg) -> None:
        worker = message.reply.rsplit(".", 1)[0]
        if worker and worker not in self.workers:
            self.workers.append(worker)
        self.pulls[worker] = self.pulls.get(worker, 0) + 1

    async def _on_inbox(self, message: Msg) -> None:
        if not message.reply.startswith(f"$JS.ACK.{self.stream}.{self.consumer}."):
            return
        tokens = message.reply.split(".")  # ... <delivered>.<stream seq>.<consumer seq>.<time>.<pending>
        self.deliveries[message.reply] = Delivery(
            stream_seq=int(tokens[-4]),
            delivered=int(tokens[-5]),
            at=time.monotonic(),
        )

    async def _on_answer(self, message: Msg) -> None:
        delivery = self.deliveries.get(message.subject)
        if delivery is None:
            return
        if message.data.startswith(b"+WPI"):
            delivery.in_progress += 1
        elif delivery.answer is None and (not message.data or message.data.startswith(TERMINAL)):
            delivery.answer = message.data[:4] or ACK
            delivery.answered_at = time.monotonic()

    async def wait_for_workers(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.workers) < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{len(self.workers)} of {count} workers pulled within {timeout:.0f}s")
            await asyncio.sleep(0.05)

    def unanswered(self, before: float) -> int:
        return sum(d.answer is None and d.at < before for d in self.deliveries.values())

    def acked(self) -> int:
        return sum(d.answer == ACK for d in self.deliveries.values())

    def takeover(self, killed_at: float) -> dict[str, Any]:
        """What the worker killed at `killed_at` held (delivered before, never answered), and when it was
        handed out again and acknowledged (call once the consumer has drained)."""
        held = {d.stream_seq for d in self.deliveries.values() if d.at < killed_at and d.answer is None}
        redelivered: dict[int, float] = {}
        acked: dict[int, float] = {}
        for d in self.deliveries.values():
            if d.stream_seq not in held or d.at < killed_at:
                continue
            redelivered[d.stream_seq] = min(redelivered.get(d.stream_seq, d.at), d.at)
            if d.answer == ACK and d.answered_at is not None:
                acked[d.stream_seq] = min(acked.get(d.stream_seq, d.answered_at), d.answered_at)
        return {
            "held": len(held),
            "taken_over": len(acked),
            "redelivered_s": _after(killed_at, min(redelivered.values(), default=None)),
            "takeover_s": _after(killed_at, min(acked.values(), default=None)),
            "recovered_s": _after(killed_at, max(acked.values())) if held and held <= set(acked) else None,
        }

    def expired_while_alive(self, killed_at: float) -> int:
        """Deliveries handed out again while still unanswered by a live worker: a batch taken from a worker
        that was alive (its ack wait passed without word from it). Should be 0."""
        handed: dict[int, list[float]] = {}
        for d in self.deliveries.values():
            handed.setdefault(d.stream_seq, []).append(d.at)
        expired = 0
        for d in self.deliveries.values():
            if d.answer is None and d.at < killed_at:
                continue  # the dead worker's
            answered = d.answered_at if d.answered_at is not None else float("inf")
            expired += any(d.at < at < answered for at in handed[d.stream_seq])
        return expired

    def in_progress_acks(self) -> int:
        return sum(d.in_progress for d in self.deliveries.values())


def _after(start: float, at: float | None) -> float | None:
    return None if at is None else round(at - start, 3)


async def failover_run(
    client: Client,
    settings: Settings,
    append: Callable[[], Coroutine[Any, Any, dict[str, int]]],
    workdir: Path,
    *,
    min_acked: int = 200,
    timeout: float = 120,
) -> dict[str, Any]:
    """Two `eventloom projector run graph` workers share the graph consumer while `append` runs (it returns
    the last seq of each session it appended to); the first is killed (SIGKILL) while it holds delivered,
    unacknowledged events (after `min_acked` events were applied, both workers pulling batches); the survivor
    drains the consumer and stops. `held` (in the result) > 0 shows the victim was caught mid-batch."""
    consumer = "projector-graph"
    watch = ConsumerWatch(client, settings.stream, consumer)
    await watch.start()
    victim = start_worker(settings, workdir / "worker-victim.log")
    survivor: subprocess.Popen[bytes] | None = None
    try:
        await watch.wait_for_workers(1, timeout)  # the first inbox to pull is the victim's
        survivor = start_worker(settings, workdir / "worker-survivor.log")
        await watch.wait_for_workers(2, timeout)
        victim_inbox, survivor_inbox = watch.workers[:2]
        appending = asyncio.create_task(append())
        deadline = time.monotonic() + timeout
        pulls = dict(watch.pulls)
        while not (
            watch.acked() >= min_acked
            and watch.unanswered(time.monotonic())
            and all(watch.pulls[w] >= pulls[w] + 3 for w in (victim_inbox, survivor_inbox))
        ):
            if appending.done() and not await _pending(client, settings.stream, consumer):
                raise RuntimeError("the workers drained the consumer before the victim was caught mid-batch")
            if time.monotonic() > deadline:
                raise RuntimeError("the two workers did not both apply events in time")
            await asyncio.sleep(0.005)
        victim.kill()
        killed_at = time.monotonic()
        victim.wait()
        expected = await appending
        while await _pending(client, settings.stream, consumer):
            if time.monotonic() > deadline + timeout:
                raise RuntimeError("the survivor did not drain the consumer in time")
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.2)  # the last answers reach the watch
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
        survivor_exit = stop_worker(survivor) if survivor is not None else None
        await watch.stop()
    return {
        **watch.takeover(killed_at),
        "expected": expected,
        "victim_exit": victim.returncode,
        "survivor_exit": survivor_exit,
        "expired_while_alive": watch.expired_while_alive(killed_at),
        "in_progress_acks": watch.in_progress_acks(),
        "deliveries": len(watch.deliveries),
    }


async def _pending(client: Client, stream: str, consumer: str) -> int:
    info = await client.jetstream().consumer_info(stream, consumer)
    return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


def start_worker(settings: Settings, log_file: Path, name: str = "graph") -> subprocess.Popen[bytes]:
    """`eventloom projector run NAME` in a process of its own, as an operator starts one on each host."""
    command = [str(Path(sys.executable).with_name("eventloom")), "projector", "run", name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")} | settings.to_env()
    with open(log_file, "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def stop_worker(worker: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGINT (finish the batch in hand, then stop); its exit code."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return int(worker.returncode)


async def graph_state(settings: Settings, expected: dict[str, int]) -> dict[str, Any]:
    """Per session of `expected` (session -> last seq appended): lost and twice-applied events, and a
    fingerprint of the whole graph (every node and relationship, with their properties)."""
    async with neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri or "", auth=(settings.neo4j_user, settings.neo4j_password)
    ) as driver:
        sessions = sorted(expected)
        checkpoints = await _column(
            driver, "MATCH (c:Checkpoint {projector: 'graph'}) WHERE c.session IN $s RETURN c.session, c.seq",
            sessions,
        )  # fmt: skip
        counts = await _column(
            driver, "MATCH (s:Session) WHERE s.id IN $s RETURN s.id, s.event_count", sessions
        )
        events = await _column(
            driver, "MATCH (e:Event) WHERE e.session IN $s RETURN e.session, count(e)", sessions
        )
        fingerprint = await _fingerprint(driver)
    lost = sum(max(0, last - min(checkpoints.get(s, 0), events.get(s, 0))) for s, last in expected.items())
    twice = sum(max(0, max(counts.get(s, 0), events.get(s, 0)) - last) for s, last in expected.items())
    return {
        "events": sum(events.values()),
        "lost": lost,
        "applied_twice": twice,
        "checkpoints_at_last_seq": all(checkpoints.get(s) == last for s, last in expected.items()),
        "fingerprint": fingerprint,
    }


async def _column(driver: neo4j.AsyncDriver, cypher: str, sessions: Sequence[str]) -> dict[str, int]:
    records, _, _ = await driver.execute_query(cypher, {"s": list(sessions)})
    return {str(r[0]): int(r[1] or 0) for r in records}


async def _fingerprint(driver: neo4j.AsyncDriver) -> str:
    """sha256 over every graph node (labels, properties) and relationship (type, properties, the keys of
    its ends), sorted: equal graphs, equal fingerprints, whatever order they were written in."""
    nodes, _, _ = await driver.execute_query(
        f"MATCH (n:{GRAPH_LABELS}) RETURN labels(n) AS labels, properties(n) AS props"
    )
    edges, _, _ = await driver.execute_query(
        f"MATCH (a:{GRAPH_LABELS})-[r]->(b:{GRAPH_LABELS}) "
        "RETURN type(r) AS type, properties(r) AS props, "
        "coalesce(a.uid, a.id, a.key) AS a, coalesce(b.uid, b.id, b.key) AS b"
    )
    lines = sorted(
        [json.dumps([sorted(r["labels"]), r["props"]], sort_keys=True, default=str) for r in nodes]
        + [json.dumps([r["type"], r["props"], r["a"], r["b"]], sort_keys=True, default=str) for r in edges]
    )
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode() + b"\n")
    return f"{len(nodes)}n/{len(edges)}r/{digest.hexdigest()[:16]}"
