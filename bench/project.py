"""Graph projection throughput and freshness on LadybugDB; prints one JSON object (progress on stderr).

Phases, all against one node (embedded NATS + ledger mirror, projectors/producers off) started apart, with
the appends made by bench/load.py in a third process, as agents make them in production:
  1. incremental: N realistic events appended at full speed while the graph projector runs alongside;
  2. freshness: a steady append load while sampled events are timed from append ack to visible in the graph;
  3. rebuild: `projectors.rebuild.rebuild` of the whole stream into a fresh generation;
  4. verification: what every consumer checks before it applies (hash, signature, chain link), alone;
  5. raw: plain LadybugDB `LOAD FROM <Arrow> ... MERGE` of as many entity nodes, the ceiling for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ladybug
import msgspec
import pyarrow as pa
from common import console, load_process, load_records, machine, progress_bar, server_binary_version
from load import CHUNK

from eventloom.bus.consumer import read_stream
from eventloom.event import decode_event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from eventloom.trust import EventVerifier
from gateway.node_process import NodeProcess
from projectors.backends import EmbeddedGraphProjector
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from projectors.runner import ProjectorRunner, RunnerOptions


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--events", type=int, default=20_000, help="events for the incremental phase (default 20000)"
    )
    parser.add_argument("--sessions", type=int, default=8, help="sessions (default 8)")
    parser.add_argument("--freshness-seconds", type=float, default=8.0, help="length of the freshness phase")
    parser.add_argument("--freshness-rate", type=int, default=1000, help="events/s appended while timing")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def drained(log: EventLog, consumer: str) -> None:
    js = log.client.jetstream()
    while True:
        info = await js.consumer_info(log.layout.name, consumer)
        if not info.num_pending and not info.num_ack_pending:
            return
        await asyncio.sleep(0.02)


async def incremental(
    log: EventLog, runner: ProjectorRunner, args: argparse.Namespace, nats_url: str
) -> float:
    total = args.events // args.sessions * args.sessions
    started = time.perf_counter()
    load = await load_process(
        args.root, nats_url, "--prefix", "proj", "--sessions", str(args.sessions), "--events", str(total)
    )
    with progress_bar() as progress:
        task = progress.add_task("append + project", total=total, rate="")
        async for record in load_records(load):
            if "seq" in record:
                progress.advance(task, CHUNK)
    await drained(log, runner.consumer)
    return float(total / (time.perf_counter() - started))


async def freshness(
    log: EventLog, projector: EmbeddedGraphProjector, args: argparse.Namespace, nats_url: str
) -> tuple[list[float], float]:
    """Seconds from append ack (in the load process) until the graph's checkpoint covers the event, while
    a steady load runs; also returns the append rate actually achieved.

    One reader polls every 10 ms for all samples still waiting, as a client would: a poller per sample
    would itself load the store it measures."""
    latencies: list[float] = []
    waiting: list[tuple[str, int, float]] = []  # (session, seq, acked)
    done = asyncio.Event()

    async def poll() -> None:
        while not (done.is_set() and not waiting):
            if waiting:
                applied = await projector.applied_seqs(sorted({session for session, _, _ in waiting}))
                now = time.monotonic()
                for sample in list(waiting):
                    session, seq, acked = sample
                    if applied.get(session, 0) >= seq or now - acked > 30:
                        latencies.append(now - acked)
                        waiting.remove(sample)
            await asyncio.sleep(0.01)

    poller = asyncio.create_task(poll())
    load = await load_process(
        args.root,
        nats_url,
        *("--prefix", "fresh", "--sessions", str(args.sessions)),
        *("--rate", str(args.freshness_rate), "--seconds", str(args.freshness_seconds)),
    )
    rate = 0.0
    async for record in load_records(load):
        if "seq" in record:
            waiting.append((record["session"], record["seq"], record["acked"]))
        else:
            rate = record["appended"] / record["seconds"]
    done.set()
    await poller
    return latencies, rate


async def verification_rate(log: EventLog) -> float:
    """What every consumer now does before it applies a batch (hash, signature, link), alone, events/s."""
    events = [
        decode_event(message.data)
        async for message in read_stream(log.client, log.layout.name, log.layout.partition_subjects())
    ]
    verifier = EventVerifier(KeyStore(log.settings.data_dir), log.client, log.layout)
    await verifier.open()
    try:
        started = time.perf_counter()
        for start in range(0, len(events), 1000):
            verdicts = await verifier.verify(events[start : start + 1000])
            assert not any(verdicts), next(v for v in verdicts if v)
        return len(events) / (time.perf_counter() - started)
    finally:
        verifier.close()


def raw_ladybug_rate(count: int, directory: Path) -> float:
    """Plain upserts of `count` entity nodes, the fastest way the store itself writes: Arrow batches of
    2,000 rows, `LOAD FROM ... MERGE`, one transaction each."""
    db = ladybug.Database(str(directory / "raw.lbug"))
    connection = ladybug.Connection(db)
    connection.execute(
        "CREATE NODE TABLE Entity(uid STRING, session STRING, name STRING, entity_type STRING, "
        "summary STRING, valid_from STRING, PRIMARY KEY(uid))"
    )
    rows = [
        {
            "uid": f"u{i}",
            "session": f"s{i % 8}",
            "name": f"n{i}",
            "entity_type": "service",
            "summary": "x" * 40,
            "valid_from": "2026-01-01T00:00:00.000000Z",
        }
        for i in range(count)
    ]
    row_type = pa.struct([(name, pa.string()) for name in rows[0]])
    started = time.perf_counter()
    for start in range(0, count, 2000):
        batch = pa.table({"r": pa.array(rows[start : start + 2000], type=row_type)})
        connection.execute("BEGIN TRANSACTION")
        connection.execute(
            "LOAD FROM $rows MERGE (e:Entity {uid: r.uid}) SET e.session = r.session, e.name = r.name, "
            "e.entity_type = r.entity_type, e.summary = r.summary, e.valid_from = r.valid_from",
            {"rows": batch},
        )
        connection.execute("COMMIT")
    return float(count / (time.perf_counter() - started))


async def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    settings = Settings(data_dir=root / "data", projectors="none", producers="none")
    node = NodeProcess(settings)
    info = node.start()
    try:
        log = await EventLog.open(Settings(data_dir=root / "data", nats_url=info.nats_url))
        projector = load_projector("graph", log.settings)
        assert isinstance(projector, EmbeddedGraphProjector)
        runner = ProjectorRunner(
            log.client,
            log.layout,
            projector,
            options=RunnerOptions(batch=1000, fetch_timeout_s=0.1),
            keys=KeyStore(log.settings.data_dir),
        )
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        await runner.ready.wait()
        console.print("phase 1: incremental")
        incremental_rate = await incremental(log, runner, args, info.nats_url)
        console.print("phase 2: freshness under load")
        latencies, achieved_rate = await freshness(log, projector, args, info.nats_url)
        stop.set()
        await task
        console.print("phase 3: rebuild")
        report = await rebuild(log, "graph")
        console.print("phase 4: verification alone")
        verify_rate = await verification_rate(log)
        await log.close()
    finally:
        node.stop()
    console.print("phase 5: raw LadybugDB upsert")
    raw = await asyncio.to_thread(raw_ladybug_rate, report.events, root)
    quantiles = statistics.quantiles(latencies, n=20) if len(latencies) >= 2 else [latencies[0]] * 19
    return {
        "benchmark": "project",
        "events_projected": report.events,
        "incremental_events_per_s": round(incremental_rate, 1),
        "rebuild_events_per_s": report.events_per_s,
        "rebuild_seconds": report.seconds,
        "freshness_s": {
            "p50": round(statistics.median(latencies), 4),
            "p95": round(quantiles[18], 4),
            "samples": len(latencies),
            "append_rate_per_s": round(achieved_rate, 1),
        },
        "raw_ladybug_upsert_per_s": round(raw, 1),
        "rebuild_to_raw_ratio": round(report.events_per_s / raw, 3) if raw else None,
        "verify_events_per_s": round(verify_rate, 1),
        "verify_share_of_rebuild": round(report.events_per_s / verify_rate, 3),
        "goals": {
            "rebuild_ge_5000_per_s": report.events_per_s >= 5000,
            "freshness_p95_lt_1s": quantiles[18] < 1.0,
        },
        "machine": machine(server_binary_version()) | {"ladybug": ladybug.__version__},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="eventloom-bench-project-"))
    try:
        args.root = root
        result = asyncio.run(bench(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
