"""Projector failover: `kill -9` the active graph worker mid-batch, `--kills` times; prints one JSON object.

A node (embedded NATS, ledger mirror; no projectors) runs apart; `eventloom projector run graph` workers on
Neo4j (`NEO4J_URI`, or a server provisioned the way the tests do it) share the graph's consumer, one active
(it holds the consumer's lease), the others standing by. While events are appended, the active worker is
killed while it holds delivered, unacknowledged events; a standby takes the lease over and carries on, and a
fresh worker joins as the next standby. `takeover_s`: from the kill to when the new holder has events in
hand (its first delivery: it is applying); `recovered_s`: to when everything the dead worker held was
applied and acknowledged again (that includes writing the first batch, as large as what piled up). At
the end the graph is checked against the appended events (`lost`, `applied_twice`) and against a clean
rebuild.

`ConsumerWatch` (bench/consumer_watch.py) sees from the side every pull request, delivery and answer of the
consumer; `graph_state` and the worker helpers here are shared with tests/test_projector_failover.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats.js.errors
import neo4j
from common import console, percentiles, print_report, progress_bar
from consumer_watch import CONSUMER, ConsumerWatch
from nats.aio.client import Client

from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from projectors.lease import lease_holders
from projectors.plugins import load_projector
from projectors.rebuild import replay_stream
from projectors.runner import ProjectorRunner, RunnerOptions
from readmodels.backends import neo4j_store
from readmodels.neo4j.driver import GRAPH_LABELS
from readmodels.neo4j.local import provision_neo4j


def start_worker(settings: Settings, log_file: Path, name: str = "graph") -> subprocess.Popen[bytes]:
    """`eventloom projector run NAME` in a process of its own, as an operator starts one on each host."""
    command = [str(Path(sys.executable).with_name("eventloom")), "projector", "run", name]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")} | settings.to_env()
    with open(log_file, "ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)


def stop_worker(worker: subprocess.Popen[bytes], timeout: float = 30) -> int:
    """SIGINT (finish the batch in hand, release the lease, stop); its exit code."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGINT)
        try:
            worker.wait(timeout)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return int(worker.returncode)


async def wait_for_holder(client: Client, pid: int, timeout: float, consumer: str = CONSUMER) -> float:
    """Until process `pid` holds `consumer`'s lease; when (time.monotonic())."""
    deadline = time.monotonic() + timeout
    while True:
        holder = (await lease_holders(client)).get(consumer)
        if holder is not None and holder.holder.split(":")[1] == str(pid):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} did not take the lease of {consumer} in {timeout:.0f}s")
        await asyncio.sleep(0.05)


async def wait_for_line(log_file: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in await asyncio.to_thread(log_file.read_text, errors="replace"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{log_file.name}: no {text!r} within {timeout:.0f}s")
        await asyncio.sleep(0.05)


# --- appends ------------------------------------------------------------------------------------------------


def session_mix(session: str, start: int, count: int) -> list[AppendRequest]:
    """Events the graph projects into nodes and edges: facts with entities and relations, tasks, decisions."""
    requests = []
    for n in range(start, start + count):
        task = f"t{n // 12}"
        service, team = f"svc-{n % 5}", f"team-{n % 3}"
        kinds: list[tuple[str, dict[str, Any]]] = [
            ("memory.fact.asserted", {
                "entities": [{"name": service, "entity_type": "service", "summary": f"rev {n // 10}"},
                             {"name": team, "entity_type": "team", "summary": "owners"}],
                "relations": [{"source": service, "target": team, "relation_type": "owned_by"}],
            }),
            ("task.proposed", {"task_id": task, "title": f"Task {task}", "goal_id": "g1"}),
            ("decision.made", {"decision_id": f"d{n}", "title": f"Decision {n}", "task_id": task}),
            ("transcript.turn", {"role": "assistant", "text": f"Turn {n} on {task}"}),
        ]  # fmt: skip
        kind, payload = kinds[n % len(kinds)]
        requests.append(AppendRequest(session=session, type=kind, actor="agent", payload=payload))
    return requests


async def append_in_flight(
    log: EventLog, sessions: Sequence[str], per_session: int, chunk: int = 20
) -> dict[str, int]:
    """`per_session` events to each session, `chunk` per session per append, until all are in; the last
    seq of each session."""
    last: dict[str, int] = {}
    for start in range(0, per_session, chunk):
        size = min(chunk, per_session - start)
        events = await log.append_many([r for s in sessions for r in session_mix(s, start, size)])
        last.update({e.session: e.seq for e in events})
        await asyncio.sleep(0.01)  # a steady flow, not one burst: the kill lands among the appends
    return last


# --- one kill -----------------------------------------------------------------------------------------------


@dataclass
class Workers:
    """A run's graph workers, the active one first; no linger (it would gather a kill's load in one batch)."""

    settings: Settings
    workdir: Path
    running: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def join(self) -> tuple[subprocess.Popen[bytes], Path]:
        log_file = self.workdir / f"worker-{len(os.listdir(self.workdir))}.log"
        self.running.append(start_worker(dataclasses.replace(self.settings, projector_linger_ms=0), log_file))
        return self.running[-1], log_file

    def stop_all(self) -> list[int]:
        return [stop_worker(worker) for worker in self.running]


async def kill_mid_batch(
    log: EventLog,
    workers: Workers,
    sessions: Sequence[str],
    per_session: int,
    *,
    lost_host: bool = False,
    timeout: float = 120,
) -> dict[str, Any]:
    """With workers[0] active: a standby joins, events are appended, the active one is killed (SIGKILL)
    while it holds delivered, unacknowledged events; the standby takes over and drains the consumer.

    On one host a standby sees at once that the holder's pid is gone and need not wait for the lease.
    `lost_host`: the holder's host vanishes instead (another host's standby cannot look at its pids): it
    is stopped (SIGSTOP: it neither renews nor exits) and killed only once the standby took over."""
    active = workers.running[0]
    watch = ConsumerWatch(log.client, log.layout.name, CONSUMER)
    await watch.start()  # before the standby joins: every pull it might make is seen
    try:
        standby, standby_log = workers.join()
        await wait_for_line(standby_log, "standing by", timeout)
        appending = asyncio.create_task(append_in_flight(log, sessions, per_session))
        deadline = time.monotonic() + timeout
        while not (watch.acked() >= 10 and watch.unanswered(time.monotonic())):
            if appending.done() and not await pending(log):
                raise RuntimeError("the consumer drained before the active worker was caught mid-batch")
            if time.monotonic() > deadline:
                raise RuntimeError("the active worker applied nothing in time")
            await asyncio.sleep(0.002)
        pullers_before = len(watch.workers)
        active.send_signal(signal.SIGSTOP if lost_host else signal.SIGKILL)
        killed_at = time.monotonic()
        if not lost_host:
            active.wait()  # reaped, as a supervisor or shell would: a zombie's pid still answers
        holder_at = await wait_for_holder(log.client, standby.pid, timeout)
        active.kill()
        active.wait()
        workers.running.remove(active)
        expected = await appending
        while await pending(log):
            if time.monotonic() > deadline + timeout:
                raise RuntimeError("the new holder did not drain the consumer in time")
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)  # the last answers reach the watch
    finally:
        await watch.stop()
    return {
        **watch.takeover(killed_at),
        "lease_taken_s": round(holder_at - killed_at, 3),
        "pullers_before_kill": pullers_before,
        "expected": expected,
    }


async def pending(log: EventLog) -> int:
    """Events not yet acknowledged (1 while the consumer is being recreated by a new holder)."""
    try:
        info = await log.client.jetstream().consumer_info(log.layout.name, CONSUMER)
    except nats.js.errors.NotFoundError:
        return 1
    return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


# --- the read model -----------------------------------------------------------------------------------------


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


async def rebuilt_fingerprint(log: EventLog) -> str:
    """The graph's fingerprint after a clean rebuild: Neo4j emptied, the stream replayed by one worker."""
    settings = log.settings
    async with neo4j_store(settings) as store:
        await store.clear()
    consumer = "rebuild-graph-failover-check"
    runner = ProjectorRunner(
        log.client, log.layout, load_projector("graph", settings), role="rebuild", consumer=consumer,
        options=RunnerOptions(batch=5000), keys=KeyStore(settings.data_dir),
    )  # fmt: skip
    total = int((await log.client.jetstream().stream_info(log.layout.name)).state.last_seq)
    try:
        await replay_stream(log, runner, total, None)
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await log.client.jetstream().delete_consumer(log.layout.name, consumer)
    async with neo4j.AsyncGraphDatabase.driver(
        settings.neo4j_uri or "", auth=(settings.neo4j_user, settings.neo4j_password)
    ) as driver:
        return await _fingerprint(driver)


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


# --- the benchmark ------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--kills",
        type=int,
        default=5,
        help="holders lost with their host, as many killed on it (5)",
    )
    parser.add_argument("--sessions", type=int, default=8, help="sessions appended to per kill (8)")
    parser.add_argument("--per-session", type=int, default=300, help="events per session per kill (300)")
    parser.add_argument("--lease-s", type=float, default=None, help="EVENTLOOM_PROJECTOR_LEASE_S (default)")
    parser.add_argument("--ack-wait-s", type=float, default=None, help="EVENTLOOM_PROJECTOR_ACK_WAIT_S")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def run_kills(args: argparse.Namespace, settings: Settings, root: Path) -> dict[str, Any]:
    async with neo4j_store(settings) as store:
        await store.clear()
    workers = Workers(settings, root / "workers")
    workers.workdir.mkdir()
    rounds: list[dict[str, Any]] = []
    expected: dict[str, int] = {}
    async with await EventLog.open(settings) as log:
        try:
            first, _ = workers.join()
            await wait_for_holder(log.client, first.pid, 120)
            with progress_bar() as progress:
                task = progress.add_task("kill -9 the active worker", total=args.kills, rate="")
                for kill in range(2 * args.kills):
                    sessions = [f"fo{kill}-{n}" for n in range(args.sessions)]
                    lost_host = kill % 2 == 0
                    result = await kill_mid_batch(
                        log, workers, sessions, args.per_session, lost_host=lost_host
                    )
                    result["lost_host"] = lost_host
                    expected |= result.pop("expected")
                    rounds.append(result)
                    progress.update(task, advance=1, rate=f"takeover {result['takeover_s']}s")
        finally:
            workers.stop_all()
        state = await graph_state(settings, expected)
        console.print("clean rebuild of the graph, to compare")
        rebuilt = await rebuilt_fingerprint(log)
    vanished = [r for r in rounds if r["lost_host"]]
    same_host = [r for r in rounds if not r["lost_host"]]
    return {
        "takeover_s": _p50_max(vanished, "takeover_s"),
        "recovered_s": _p50_max(vanished, "recovered_s"),
        "same_host_takeover_s": _p50_max(same_host, "takeover_s"),
        "same_host_recovered_s": _p50_max(same_host, "recovered_s"),
        "kills": len(rounds),
        "caught_mid_batch": sum(r["held"] > 0 for r in rounds),
        "events": sum(expected.values()),
        "lost": state["lost"],
        "applied_twice": state["applied_twice"],
        "equals_clean_rebuild": state["fingerprint"] == rebuilt,
        "standby_pulled_before_kill": sum(r["pullers_before_kill"] > 1 for r in rounds),
        "lease_s": settings.projector_lease_s,
        "ack_wait_s": settings.projector_ack_wait_s,
        "rounds": rounds,
    }


def _p50_max(rounds: list[dict[str, Any]], key: str) -> dict[str, float] | None:
    samples = [r[key] for r in rounds if r[key] is not None]
    return {k: v for k, v in percentiles(samples).items() if k != "p95"} if samples else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="eventloom-bench-failover-"))
    try:
        with provision_neo4j() as endpoint:
            console.print(f"Neo4j: {endpoint.uri} ({endpoint.source})")
            node = NodeProcess(Settings(data_dir=root / "data", projectors="none", producers="none"))
            info = node.start()
            try:
                settings = Settings(
                    data_dir=root / "data", nats_url=info.nats_url, graph_backend="neo4j", projectors="graph",
                    producers="none", embedder="hash", neo4j_uri=endpoint.uri, neo4j_user=endpoint.user,
                    neo4j_password=endpoint.password,
                )  # fmt: skip
                overrides = {"projector_lease_s": args.lease_s, "projector_ack_wait_s": args.ack_wait_s}
                settings = dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v})
                result = asyncio.run(run_kills(args, settings, root))
            finally:
                node.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
