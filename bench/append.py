"""Append throughput: Eventloom `append_many` against raw nats-py `publish_async`, plus ledger-mirror lag.

Prints exactly one JSON object on stdout; progress goes to stderr.

    python bench/append.py                       # starts its own node (embedded NATS + ledger mirror)
    python bench/append.py --events 50000 --sessions 16
    python bench/append.py --nats-url nats://127.0.0.1:4222   # a scratch server; the node still runs here

What is measured, in this order, on one server:

1. raw: nats-py `js.publish_async` of messages exactly as large as an encoded event, to a separate file
   stream `BENCHRAW` (subjects `benchraw.>`), over as many subjects as there are sessions, waiting for
   every ack;
2. eventloom: one task per session calling `EventLog.append_many` with `--batch` requests at a time, all
   sessions concurrently, until every event is acknowledged (validated, chained, signed, published with
   optimistic concurrency and deduplication);
3. mirror catch-up: seconds from the last ack until the `ledger-mirror` durable consumer (running in the
   node's own process, as in production) has nothing pending or unacknowledged; then the ledger files are
   counted line by line;
4. raw again, so the baseline brackets the Eventloom run; `raw_publish_async_per_s` is the mean of both.

Each timed phase is preceded by a small warm-up (one batch per session), not counted in the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import nats
import nats.js.errors
from common import CpuMeter, console, machine, progress_bar, server_binary_version
from nats.js.api import StorageType, StreamConfig

from eventloom.bus.auth import NatsCredentials
from eventloom.bus.connection import credentials_of, server_urls
from eventloom.event import ENVELOPE_VERSION, Event, encode_event, utc_timestamp
from eventloom.ledger.files import ledger_path
from eventloom.ledger.mirror import MIRROR_CONSUMER
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.runtime import RuntimeInfo
from eventloom.settings import DEFAULT_NATS_MEMORY_LIMIT_MB, Settings
from gateway.node_process import NodeProcess

RAW_STREAM = "BENCHRAW"
RAW_SUBJECT_ROOT = "benchraw"
EVENT_TYPE = "x.bench.appended"
ACTOR = "bench"
NODE_START_TIMEOUT_S = 30.0
NODE_STOP_TIMEOUT_S = 20.0
MIRROR_TIMEOUT_S = 120.0
MIRROR_POLL_S = 0.02


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to append (default 20000)")
    parser.add_argument("--sessions", type=int, default=8, help="sessions written concurrently (default 8)")
    parser.add_argument(
        "--payload-bytes", type=int, default=1000, help="encoded payload size per event (default 1000)"
    )
    parser.add_argument(
        "--batch", type=int, default=500, help="requests per append_many call per session (default 500)"
    )
    parser.add_argument(
        "--raw-max-pending",
        type=int,
        default=4000,
        help="publish_async_max_pending of the raw baseline (nats-py default 4000)",
    )
    parser.add_argument("--nats-url", default=None, help="use this NATS server instead of an embedded one")
    parser.add_argument("--sync", default="default", help="fsync policy of the embedded server (default)")
    parser.add_argument(
        "--nats-memory-limit-mb",
        type=int,
        default=DEFAULT_NATS_MEMORY_LIMIT_MB,
        help="soft memory limit of the embedded server, MiB (default 0: Go's default)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    args = parser.parse_args(argv)
    if args.events < args.sessions or args.sessions < 1 or args.batch < 1 or args.payload_bytes < 16:
        parser.error("need events >= sessions >= 1, batch >= 1 and payload-bytes >= 16")
    return args


# ---------------------------------------------------------------------------------------------- payloads


def make_payload(n: int, size: int) -> dict[str, Any]:
    """A payload whose compact JSON encoding is exactly `size` bytes (for size >= ~40)."""
    head = {"n": n, "kind": "observation", "text": ""}
    overhead = len(msgspec.json.encode(head))
    filler = (f"{n:08d} lorem ipsum dolor sit amet consectetur adipiscing elit " * (size // 40 + 2))[
        : max(0, size - overhead)
    ]
    return {**head, "text": filler}


def sample_event(session: str, payload: dict[str, Any]) -> bytes:
    """An encoded event the size of a real one: for sizing the raw baseline's messages."""
    event = Event(
        v=ENVELOPE_VERSION,
        session=session,
        seq=1000,
        ts=utc_timestamp(),
        type=EVENT_TYPE,
        actor=ACTOR,
        payload=payload,
        caused_by=[],
        prev_hash="0" * 64,
        hash="0" * 64,
        sig="A" * 86,
        key_id="0" * 16,
    )
    return encode_event(event)


def session_names(run_id: str, sessions: int) -> list[str]:
    return [f"bench-{run_id}-{i:03d}" for i in range(sessions)]


def split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def chunks(items: list[AppendRequest], size: int) -> Iterator[list[AppendRequest]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------------------------------------- the node


# ---------------------------------------------------------------------------------------------- phases


async def raw_publish(
    url: str,
    credentials: NatsCredentials | None,
    message: bytes,
    subjects: list[str],
    count: int,
    max_pending: int,
    label: str,
) -> float:
    """Acked messages per second of plain `js.publish_async` (no headers) to the BENCHRAW stream."""
    login = {"user": credentials.user, "password": credentials.password} if credentials else {}
    nc = await nats.connect(server_urls(url), name="bench-raw", **login)  # one server or a comma list
    try:
        js = nc.jetstream(timeout=30, publish_async_max_pending=max_pending)
        config = StreamConfig(
            name=RAW_STREAM, subjects=[f"{RAW_SUBJECT_ROOT}.>"], storage=StorageType.FILE, num_replicas=1
        )
        try:
            await js.add_stream(config)
        except nats.js.errors.BadRequestError:
            await js.update_stream(config)
        await js.purge_stream(RAW_STREAM)
        futures: list[asyncio.Future[Any]] = []
        for subject in subjects:  # warm-up
            futures.append(await js.publish_async(subject, message))
        await js.publish_async_completed()
        for future in futures:
            future.result()
        futures.clear()
        step = max(1, count // 100)
        with progress_bar() as progress:
            task = progress.add_task(label, total=count, rate="")
            started = time.perf_counter()
            for i in range(count):
                futures.append(await js.publish_async(subjects[i % len(subjects)], message))
                if i % step == step - 1:
                    progress.update(task, completed=i + 1)
            await js.publish_async_completed()
            elapsed = time.perf_counter() - started
            progress.update(task, completed=count, rate=f"{count / elapsed:,.0f}/s")
        failed = [f for f in futures if f.exception() is not None]
        if failed:
            raise SystemExit(f"raw publish: {len(failed)} publishes failed: {failed[0].exception()!r}")
        info = await js.stream_info(RAW_STREAM)
        stored, expected = info.state.messages, count + len(subjects)
        if stored != expected:
            raise SystemExit(f"raw publish: stream holds {stored} messages, expected {expected}")
        return count / elapsed
    finally:
        with contextlib.suppress(Exception):
            await nc.jetstream().delete_stream(RAW_STREAM)
        await nc.close()


async def eventloom_append(
    log: EventLog, plan: dict[str, list[AppendRequest]], batch: int
) -> tuple[float, float, int]:
    """(seconds, monotonic time of the last ack, acknowledged events) for every session concurrently."""
    total = sum(len(requests) for requests in plan.values())
    acked = 0
    last_ack = 0.0
    with progress_bar() as progress:
        task = progress.add_task("eventloom append_many", total=total, rate="")

        async def one_session(requests: list[AppendRequest]) -> None:
            nonlocal acked, last_ack
            for chunk in chunks(requests, batch):
                events = await log.append_many(chunk)
                acked += len(events)
                last_ack = time.perf_counter()
                progress.update(task, completed=acked)

        started = time.perf_counter()
        await asyncio.gather(*(one_session(requests) for requests in plan.values()))
        elapsed = time.perf_counter() - started
        progress.update(task, rate=f"{total / elapsed:,.0f}/s")
    return elapsed, last_ack, acked


async def mirror_catch_up(log: EventLog, last_ack: float) -> float:
    """Seconds from `last_ack` until the ledger mirror has nothing pending and nothing unacknowledged."""
    js = log.client.jetstream()
    deadline = time.perf_counter() + MIRROR_TIMEOUT_S
    with console.status("waiting for the ledger mirror"):
        while True:
            try:
                info = await js.consumer_info(log.layout.name, MIRROR_CONSUMER)
            except nats.js.errors.NotFoundError:
                info = None
            now = time.perf_counter()
            if info is not None and not info.num_pending and not info.num_ack_pending:
                return now - last_ack
            if now > deadline:
                raise SystemExit(f"ledger mirror did not catch up within {MIRROR_TIMEOUT_S:.0f}s")
            await asyncio.sleep(MIRROR_POLL_S)


def ledger_lines(ledger_dir: Path, sessions: list[str]) -> dict[str, int]:
    counts = {}
    for session in sessions:
        path = ledger_path(ledger_dir, session)
        with open(path, "rb") as handle:
            counts[session] = sum(1 for _ in handle)
    return counts


# ---------------------------------------------------------------------------------------------- main


async def bench(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    # The log alone (embedded NATS + ledger mirror): projectors and producers have their own benchmarks.
    log_only = Settings(
        data_dir=data_dir,
        nats_url=args.nats_url,
        sync=args.sync,
        projectors="none",
        producers="none",
        nats_memory_limit_mb=args.nats_memory_limit_mb,
    )
    node = NodeProcess(log_only)
    console.print(f"starting node in {data_dir}")
    info = node.start(timeout=NODE_START_TIMEOUT_S)
    try:
        return await _bench(args, data_dir, info.nats_url, info)
    finally:
        node.stop(timeout=NODE_STOP_TIMEOUT_S)


async def _bench(args: argparse.Namespace, data_dir: Path, url: str, node: RuntimeInfo) -> dict[str, Any]:
    load_at_start = round(os.getloadavg()[0], 2)
    run_id = datetime.now(UTC).strftime("%H%M%S") + f"{os.getpid() % 1000:03d}"
    sessions = session_names(run_id, args.sessions)
    per_session = split(args.events, args.sessions)
    warm = min(args.batch, 50)
    plan: dict[str, list[AppendRequest]] = {}
    warm_plan: dict[str, list[AppendRequest]] = {}
    n = 0
    for session, count in zip(sessions, per_session, strict=True):
        warm_plan[session] = [
            AppendRequest(session=session, type=EVENT_TYPE, actor=ACTOR, payload=make_payload(-1, 64))
            for _ in range(warm)
        ]
        plan[session] = []
        for _ in range(count):
            plan[session].append(
                AppendRequest(
                    session=session, type=EVENT_TYPE, actor=ACTOR, payload=make_payload(n, args.payload_bytes)
                )
            )
            n += 1
    message = sample_event(sessions[0], plan[sessions[0]][0].payload)
    raw_subjects = [f"{RAW_SUBJECT_ROOT}.{s}" for s in sessions]

    meter = CpuMeter(node)
    cpu: dict[str, dict[str, float]] = {}
    meter.start()
    admin = credentials_of(Settings(data_dir=data_dir))  # the node's own bus, as its operator
    raw_before = await raw_publish(
        url, admin, message, raw_subjects, args.events, args.raw_max_pending, "raw publish_async (before)"
    )
    cpu["raw_before"] = meter.stop()

    settings = Settings(data_dir=data_dir, nats_url=url)
    log = await EventLog.open(settings)
    try:
        server_version = str(log.client._server_info.get("version", "")) or server_binary_version()
        for requests in warm_plan.values():  # loads each session's tail, opens the subjects
            await log.append_many(requests)
        meter.start()
        seconds, last_ack, acked = await eventloom_append(log, plan, args.batch)
        cpu["eventloom_append"] = meter.stop()
        meter.start()
        catch_up = await mirror_catch_up(log, last_ack)
        cpu["mirror_catch_up"] = meter.stop()
        atomic = log.layout.atomic_batches
    finally:
        await log.close()

    lines = await asyncio.to_thread(ledger_lines, settings.ledger_dir, sessions)
    expected = {s: c + warm for s, c in zip(sessions, per_session, strict=True)}
    ledger_ok = lines == expected
    if not ledger_ok:
        console.print(f"[red]ledger line counts differ: {lines} != {expected}[/]")

    meter.start()
    raw_after = await raw_publish(
        url, admin, message, raw_subjects, args.events, args.raw_max_pending, "raw publish_async (after)"
    )
    cpu["raw_after"] = meter.stop()
    raw_rate = (raw_before + raw_after) / 2
    eventloom_rate = acked / seconds
    return {
        "benchmark": "append",
        "events": acked,
        "sessions": args.sessions,
        "batch": args.batch,
        "payload_bytes": args.payload_bytes,
        "message_bytes": len(message),
        "eventloom_events_per_s": round(eventloom_rate, 1),
        "raw_publish_async_per_s": round(raw_rate, 1),
        "raw_publish_async_per_s_before": round(raw_before, 1),
        "raw_publish_async_per_s_after": round(raw_after, 1),
        "ratio": round(eventloom_rate / raw_rate, 3),
        "mirror_catch_up_s": round(catch_up, 3),
        "ledger_lines_ok": ledger_ok,
        "ledger_lines": sum(lines.values()),
        "seconds": round(seconds, 3),
        "goals": {
            "ratio_ge_0_5": eventloom_rate / raw_rate >= 0.5,
            "mirror_catch_up_le_2s": catch_up <= 2.0,
        },
        "atomic_batches": atomic,
        "server": {"url": url if args.nats_url else "embedded", "sync": args.sync},
        "cpu_s": cpu,
        "machine": {**machine(server_version), "loadavg_1m_at_start": load_at_start},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="eventloom-bench-"))
    try:
        result = asyncio.run(bench(args, tmp / "data"))
    finally:
        if args.keep:
            console.print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    sys.stdout.flush()
    return 0 if result["ledger_lines_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
