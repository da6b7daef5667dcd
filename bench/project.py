"""Graph projection throughput and freshness on LadybugDB; prints one JSON object (progress on stderr).

Phases, all against one node (embedded NATS + ledger mirror, projectors/producers off) started apart, with
the appends made by bench/load.py in a third process, as agents make them in production:
  1. backlog: N realistic events appended at full speed, nothing projecting (the append rate alone);
  2. incremental: the graph projector's live runner drains that backlog, as it does after a restart or a
     burst; its rate over the first and the last 10 % of the events shows whether it slows as the graph
     grows, and a profile per stage (fetch, decode, verify, extract, each write ...) shows where time goes;
  3. freshness: a steady append load while sampled events are timed from append ack to visible in the graph;
  4. rebuild: `projectors.rebuild.rebuild` of the whole stream into a fresh generation;
  5. verification: what every consumer checks before it applies (hash, signature, chain link), alone;
  6. raw: plain LadybugDB `LOAD FROM <Arrow> ... MERGE` of as many entity nodes, the ceiling for comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import ladybug
import msgspec
import pyarrow as pa
from common import (
    console,
    load_process,
    load_records,
    machine,
    peak_rss_mb,
    progress_bar,
    server_binary_version,
)
from load import CHUNK

from eventloom.bus.consumer import read_stream
from eventloom.event import decode_event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from eventloom.stages import StageTimes
from eventloom.trust import EventVerifier
from gateway.node_process import NodeProcess
from projectors.backends import EmbeddedGraphProjector
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from projectors.runner import ProjectorRunner, RunnerOptions
from readmodels.embedded.graph_store import DEFAULT_CHECKPOINT_THRESHOLD


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to project (default 20000)")
    parser.add_argument("--sessions", type=int, default=8, help="sessions (default 8)")
    parser.add_argument("--freshness-seconds", type=float, default=8.0, help="length of the freshness phase")
    parser.add_argument("--freshness-rate", type=int, default=3000, help="events/s appended while timing")
    parser.add_argument(
        "--time-limit",
        type=float,
        default=0.0,
        help="stop the incremental phase after this many seconds (0: none); the rates cover what it did",
    )
    parser.add_argument(
        "--batch", type=int, default=RunnerOptions.batch, help="the runner's largest batch (a node's default)"
    )
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def drained(log: EventLog, consumer: str) -> None:
    js = log.client.jetstream()
    while True:
        info = await js.consumer_info(log.layout.name, consumer)
        if not info.num_pending and not info.num_ack_pending:
            return
        await asyncio.sleep(0.02)


async def append_backlog(args: argparse.Namespace, nats_url: str) -> tuple[int, float]:
    """Append the events at full speed with nothing projecting; (events, events/s)."""
    total = args.events // args.sessions * args.sessions
    load = await load_process(
        args.root, nats_url, "--prefix", "proj", "--sessions", str(args.sessions), "--events", str(total)
    )
    rate = 0.0
    with progress_bar() as progress:
        task = progress.add_task("append backlog", total=total, rate="")
        async for record in load_records(load):
            if "seq" in record:
                progress.advance(task, CHUNK)
            else:
                rate = record["appended"] / record["seconds"]
    return total, rate


@dataclass
class Mark:
    """The runner's state when it had applied `applied` events."""

    applied: int
    at: float
    stages: StageTimes


@dataclass
class Progression:
    """Marks taken every 10 % of the events as the runner applies them."""

    total: int
    marks: list[Mark] = field(default_factory=list)

    def rate(self, first: Mark, last: Mark) -> float:
        return (last.applied - first.applied) / (last.at - first.at) if last.at > first.at else 0.0

    def window(self, first: Mark, last: Mark) -> dict[str, Any]:
        """Rate and per-event profile between two marks."""
        events = last.applied - first.applied
        spent = last.stages.since(first.stages)
        return {
            "events": events,
            "events_per_s": round(self.rate(first, last), 1),
            "profile_us_per_event": spent.per_event_us(events),
            "rows_per_event": spent.items_per_event(events),
        }


async def incremental(runner: ProjectorRunner, total: int, time_limit: float) -> Progression:
    """Watch the live runner, just started, drain the backlog (or give up at `time_limit`)."""
    progression = Progression(total)
    step = max(1, total // 10)
    started = time.perf_counter()
    # From nothing, not from the runner's stages now: it may have committed its first batch already (and
    # not yet acknowledged it), and those rows belong to the first window.
    progression.marks.append(Mark(0, started, StageTimes()))
    next_mark = step
    with progress_bar() as progress:
        bar = progress.add_task("incremental projection", total=total, rate="")
        while True:
            applied = runner.stats.applied
            now = time.perf_counter()
            progress.update(bar, completed=applied, rate=f"{applied / (now - started):,.0f}/s")
            stages = runner.stage_times()
            if applied >= total or (applied >= next_mark and between_batches(stages)):
                progression.marks.append(Mark(applied, now, stages))
                next_mark = (applied // step + 1) * step
            if applied >= total or (time_limit and now - started > time_limit):
                break
            await asyncio.sleep(0.01)
    return progression


def between_batches(stages: StageTimes) -> bool:
    """Whether every batch the store committed is also counted as applied: the runner counts a batch after
    acknowledging it, so a mark taken in between would give a window rows of events it does not count."""
    return stages.calls.get("apply.write.commit", 0) == stages.calls.get("ack", 0)


def summary(progression: Progression) -> dict[str, Any]:
    marks = progression.marks
    first, last = marks[0], marks[-1]
    whole = progression.window(first, last)
    result: dict[str, Any] = {
        "events": whole["events"],
        "events_per_s": whole["events_per_s"],
        "complete": last.applied >= progression.total,
        "profile_us_per_event": whole["profile_us_per_event"],
        "rows_per_event": whole["rows_per_event"],
    }
    if len(marks) >= 3:
        result["first_10pct"] = progression.window(marks[0], marks[1])
        result["last_10pct"] = progression.window(marks[-2], marks[-1])
    return result


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


async def verification_rate(log: EventLog, limit: int = 200_000) -> float:
    """What every consumer now does before it applies a batch (hash, signature, link), alone, events/s:
    over the stream's first `limit` events, read (untimed) and checked (timed) 1,000 at a time."""
    verifier = EventVerifier(KeyStore(log.settings.data_dir), log.client, log.layout)
    await verifier.open()
    checked, seconds, chunk = 0, 0.0, []
    try:
        async for message in read_stream(log.client, log.layout.name, log.layout.partition_subjects()):
            chunk.append(decode_event(message.data))
            if len(chunk) == 1000 or checked + len(chunk) >= limit:
                started = time.perf_counter()
                verdicts = await verifier.verify(chunk)
                seconds += time.perf_counter() - started
                assert not any(verdicts), next(v for v in verdicts if v)
                checked, chunk = checked + len(chunk), []
                if checked >= limit:
                    break
        if chunk:
            started = time.perf_counter()
            await verifier.verify(chunk)
            seconds += time.perf_counter() - started
            checked += len(chunk)
        return checked / seconds if seconds else 0.0
    finally:
        verifier.close()


RAW_ROWS_AT_MOST = 200_000
"""The raw baseline's size cap: past it the engine's own WAL checkpoints, whose cost grows with the table,
dominate a plain upsert (a 1M-row run took over 15 minutes)."""


def raw_ladybug_rate(count: int, directory: Path) -> float:
    """Plain upserts of `count` entity nodes (at most `RAW_ROWS_AT_MOST`), the fastest way the store itself
    writes: Arrow batches of 2,000 rows, `LOAD FROM ... MERGE`, one transaction each."""
    count = min(count, RAW_ROWS_AT_MOST)
    db = ladybug.Database(str(directory / "raw.lbug"), checkpoint_threshold=DEFAULT_CHECKPOINT_THRESHOLD)
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
        console.print("phase 1: append the backlog")
        total, backlog_rate = await append_backlog(args, info.nats_url)
        projector = load_projector("graph", log.settings)
        assert isinstance(projector, EmbeddedGraphProjector)
        options = RunnerOptions(batch=args.batch)
        keys = KeyStore(log.settings.data_dir)
        runner = ProjectorRunner(log.client, log.layout, projector, options=options, keys=keys)
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop))
        await runner.ready.wait()
        console.print("phase 2: incremental projection of the backlog")
        progression = await incremental(runner, total, args.time_limit)
        if progression.marks[-1].applied >= total:
            await drained(log, runner.consumer)
        console.print("phase 3: freshness under load")
        latencies, achieved_rate = await freshness(log, projector, args, info.nats_url)
        stop.set()
        await task
        console.print("phase 4: rebuild")
        with progress_bar() as progress:
            bar = progress.add_task("rebuild", total=None, rate="")
            report = await rebuild(
                log, "graph", progress=lambda done, all_: progress.update(bar, completed=done, total=all_)
            )
        console.print("phase 5: verification alone")
        verify_rate = await verification_rate(log)
        memory = peak_rss_mb({"node": info.pid, "nats_server": info.nats_pid}, own="bench_projector")
        await log.close()
    finally:
        node.stop()
    console.print("phase 6: raw LadybugDB upsert")
    raw = await asyncio.to_thread(raw_ladybug_rate, report.events, root)
    return result(progression, report, latencies, achieved_rate, backlog_rate, raw, verify_rate, memory)


def result(
    progression: Progression,
    report: Any,
    latencies: list[float],
    achieved_rate: float,
    backlog_rate: float,
    raw: float,
    verify_rate: float,
    memory: dict[str, float],
) -> dict[str, Any]:
    quantiles = statistics.quantiles(latencies, n=20) if len(latencies) >= 2 else [latencies[0]] * 19
    projected = summary(progression)
    rate = projected["events_per_s"]
    first = projected.get("first_10pct", {}).get("events_per_s", 0.0)
    last = projected.get("last_10pct", {}).get("events_per_s", 0.0)
    ratio = rate / report.events_per_s if report.events_per_s else 0.0
    return {
        "benchmark": "project",
        "events": progression.total,
        "incremental_events_per_s": rate,
        "rebuild_events_per_s": report.events_per_s,
        "incremental_to_rebuild_ratio": round(ratio, 3),
        "rate_last_vs_first_10pct": round(last / first, 3) if first else None,
        "append_rate_per_s": round(achieved_rate, 1),
        "backlog_append_events_per_s": round(backlog_rate, 1),
        "incremental": projected,
        "rebuild_events": report.events,
        "rebuild_seconds": report.seconds,
        "freshness_s": {
            "p50": round(statistics.median(latencies), 4),
            "p95": round(quantiles[18], 4),
            "samples": len(latencies),
            "append_rate_per_s": round(achieved_rate, 1),
        },
        "raw_ladybug_upsert_per_s": round(raw, 1),
        "raw_ladybug_rows": min(report.events, RAW_ROWS_AT_MOST),
        "rebuild_to_raw_ratio": round(report.events_per_s / raw, 3) if raw else None,
        "verify_events_per_s": round(verify_rate, 1),
        "verify_share_of_rebuild": round(report.events_per_s / verify_rate, 3),
        "peak_rss_mb": memory,
        "goals": {
            "incremental_ge_0_8_rebuild": ratio >= 0.8,
            "last_10pct_ge_0_8_first": bool(first) and last >= 0.8 * first,
            "freshness_p95_lt_1s": quantiles[18] < 1.0,
            "rss_lt_4gb": max(memory.values()) < 4096,
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
