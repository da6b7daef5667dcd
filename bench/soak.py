"""Memory under load: a real node (every projector and producer) fed at a steady rate while agents ask it.

Prints exactly one JSON object on stdout; a progress bar and one line per interval go to stderr.

    python bench/soak.py --minutes 30                     # 1,000 events/s, 10 queries/s, 60 s intervals
    python bench/soak.py --minutes 5 --rate 500 --interval 30
    python bench/soak.py --burst 100000 --minutes 0       # node RSS after 100k events as fast as possible

What happens, in this order, against a node started as `eventloom up` starts it (`gateway.node_process`):

1. with `--burst N`: N events of `bench/corpus.py`'s synthetic agent memory appended as fast as the node
   acknowledges them, then a wait until every consumer (ledger mirror, projectors, producers) has nothing
   pending, then `--settle` seconds; `node_rss_mb_at_100k` is the node's resident memory then (when N is
   at least 100,000), next to its peak;
2. for `--minutes`: `--rate` events/s over `--sessions` sessions and `--queries-per-s` questions, half
   `memory checkout` through the query service as the gateway asks it (`MemoryClient.checkout`), half
   searches (`MemoryClient.query`); every 2 s the resident memory (VmRSS) of the node and of every process
   under it (nats-server, workers); per `--interval`, the mean RSS, each consumer's lag and the checkout
   and search p95.

`rss_growth_fraction` is the largest growth of any process after warm-up: (mean RSS in the last interval -
mean RSS in the last warm-up interval) / the latter. Warm-up is the first 10 % of the intervals, at least
one. `checkout_p95_ratio_last_first` compares the last and first 5 minutes (the last and first interval
when the run is shorter than 10 minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, progress_bar, server_binary_version
from corpus import Corpus
from soak_probe import (
    Interval,
    consumer_lag,
    growth,
    node_processes,
    resident_by_mapping,
    rss_mb,
    window_p95,
)

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from readmodels.checkout.model import CheckoutRequest
from readmodels.query.client import MemoryClient
from readmodels.retrieval.model import Query

SAMPLE_S = 2.0
TICK_S = 0.1
CATCH_UP_TIMEOUT_S = 1800.0
WINDOW_S = 300.0
BURST_CHUNK = 500
MAX_IN_FLIGHT = 32


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="sustained load, minutes (default 5)")
    parser.add_argument("--rate", type=int, default=1000, help="events appended per second (default 1000)")
    parser.add_argument("--queries-per-s", type=float, default=10.0, help="checkouts + searches per second")
    parser.add_argument("--interval", type=float, default=60.0, help="seconds per reported interval")
    parser.add_argument("--sessions", type=int, default=16, help="sessions written (default 16)")
    parser.add_argument("--burst", type=int, default=0, help="first append this many events at full speed")
    parser.add_argument("--settle", type=float, default=40.0, help="seconds after a burst's catch-up")
    parser.add_argument("--projectors", default="all", help="EVENTLOOM_PROJECTORS of the node (default all)")
    parser.add_argument("--producers", default="all", help="EVENTLOOM_PRODUCERS of the node (default all)")
    parser.add_argument(
        "--buffer-pool-mb", type=int, default=None, help="EVENTLOOM_LADYBUG_BUFFER_POOL_MB of the node"
    )
    parser.add_argument(
        "--projector-batch",
        type=int,
        default=None,
        help="EVENTLOOM_PROJECTOR_BATCH of the node (default: a node's, 500)",
    )
    parser.add_argument(
        "--projector-linger-ms",
        type=int,
        default=None,
        help="EVENTLOOM_PROJECTOR_LINGER_MS of the node (default 200; 0: apply each fetch at once)",
    )
    parser.add_argument(
        "--mmap-threshold-kib",
        type=int,
        default=None,
        help="EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB of the node (default 256; 0: glibc's sliding threshold)",
    )
    parser.add_argument(
        "--nats-memory-limit-mb",
        type=int,
        default=None,
        help="EVENTLOOM_NATS_MEMORY_LIMIT_MB of the node (default 0: Go's default)",
    )
    parser.add_argument(
        "--unbounded",
        action="store_true",
        help="the memory settings as before issue 23: engine-default buffer pools, glibc arenas and "
        "mmap threshold, no trim, batches of 2,000",
    )
    parser.add_argument(
        "--embedder", default=None, help="EVENTLOOM_EMBEDDER of the node (default: the default embedder)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    args = parser.parse_args(argv)
    for name in ("minutes", "rate", "queries_per_s", "interval", "sessions", "burst", "settle"):
        value = getattr(args, name)
        if not (value >= 0 and math.isfinite(value)):
            parser.error(f"--{name.replace('_', '-')}: must be a number >= 0, got {value!r}")
    if args.sessions < 1 or args.interval <= 0 or (args.minutes > 0 and args.rate < 1):
        parser.error("--sessions and --interval must be more than 0, and --rate too when --minutes is")
    return args


class Soak:
    """The load, the questions and the sampling against one running node."""

    def __init__(self, args: argparse.Namespace, log: EventLog, node_pid: int) -> None:
        self.args = args
        self.log = log
        self.node_pid = node_pid
        self.corpus = Corpus(seed=23, sessions=args.sessions)
        self.memory = MemoryClient(log.client, timeout_s=30)
        self.appended = 0
        self.first_rss: dict[str, float] = {}
        self.peak_rss: dict[str, float] = {}

    def sample_rss(self) -> dict[str, float | None]:
        rss = {name: rss_mb(pid) for name, pid in node_processes(self.node_pid).items()}
        for name, mb in rss.items():
            if mb is not None:
                self.first_rss.setdefault(name, round(mb, 1))
                self.peak_rss[name] = round(max(mb, self.peak_rss.get(name, 0.0)), 1)
        return rss

    async def append(self, count: int) -> None:
        """`count` more events of the corpus, each session's in order, the sessions concurrently."""
        by_session: dict[str, list[AppendRequest]] = {}
        for n in range(self.appended, self.appended + count):
            request = self.corpus.event(n)
            by_session.setdefault(request.session, []).append(request)
        await asyncio.gather(*(self.log.append_many(requests) for requests in by_session.values()))
        self.appended += count

    async def lag(self) -> dict[str, int]:
        return await consumer_lag(self.log.client, self.log.layout.name)

    async def burst(self) -> dict[str, Any]:
        total = self.args.burst
        started = time.perf_counter()
        with progress_bar() as progress:
            task = progress.add_task("burst append", total=total, rate="")
            while self.appended < total:
                await self.append(min(BURST_CHUNK * self.args.sessions, total - self.appended))
                self.sample_rss()
                progress.update(task, completed=self.appended)
            appended_s = time.perf_counter() - started
            progress.update(task, rate=f"{total / appended_s:,.0f}/s")
        catch_up_s = await self.catch_up(started + appended_s)
        with console.status(f"settling {self.args.settle:g}s"):
            deadline = time.monotonic() + self.args.settle
            while time.monotonic() < deadline:
                self.sample_rss()
                await asyncio.sleep(min(SAMPLE_S, max(0.0, deadline - time.monotonic())))
        after = {name: round(mb, 1) for name, mb in self.sample_rss().items() if mb is not None}
        return {
            "burst_events": total,
            "burst_append_per_s": round(total / appended_s, 1),
            "burst_catch_up_s": round(catch_up_s, 1),
            "node_rss_mb_at_100k": after.get("node") if total >= 100_000 else None,
            "rss_mb_after_burst": after,
            "rss_mb_peak_during_burst": dict(self.peak_rss),
            "node_rss_mb_by_mapping": resident_by_mapping(self.node_pid),
        }

    async def catch_up(self, since: float) -> float:
        """Seconds from `since` until no consumer has anything pending or unacknowledged."""
        deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
        with console.status("waiting for every consumer to catch up") as status:
            while time.monotonic() < deadline:
                lags = await self.lag()
                self.sample_rss()
                if lags and not any(lags.values()):
                    return time.perf_counter() - since
                status.update(f"catching up: {max(lags.values(), default=0):,} behind")
                await asyncio.sleep(SAMPLE_S)
        raise SystemExit(f"the consumers did not catch up within {CATCH_UP_TIMEOUT_S:.0f}s: {lags}")

    async def soak(self) -> list[Interval]:
        """The steady load and the questions for `--minutes`, one `Interval` per `--interval`."""
        duration = self.args.minutes * 60
        intervals = [Interval(0, 0.0)]
        stop = asyncio.Event()
        asking = asyncio.create_task(self.ask(stop, intervals))
        started, next_sample, base = time.perf_counter(), 0.0, self.appended
        with progress_bar() as progress:
            task = progress.add_task("soak", total=round(duration), rate="")
            while (elapsed := time.perf_counter() - started) < duration:
                if elapsed >= (len(intervals)) * self.args.interval:
                    await self.close_interval(intervals[-1])
                    intervals.append(Interval(len(intervals), elapsed))
                if elapsed >= next_sample:
                    intervals[-1].sample(self.sample_rss())
                    next_sample += SAMPLE_S
                due = int(elapsed * self.args.rate) - (self.appended - base)
                if due > 0:
                    await self.append(due)
                progress.update(task, completed=round(elapsed), rate=f"{self.appended - base:,} events")
                await asyncio.sleep(max(0.0, TICK_S - (time.perf_counter() - started - elapsed)))
        stop.set()
        await asking
        intervals[-1].sample(self.sample_rss())
        await self.close_interval(intervals[-1])
        return intervals

    async def close_interval(self, interval: Interval) -> None:
        interval.lag = await self.lag()
        interval.appended_at_end = self.appended
        summary = interval.summary()
        console.print(
            f"interval {interval.index} ({summary['started_s']:.0f}s): rss MB {summary['rss_mb']}, "
            f"lag max {summary['lag_max']:,}, checkout p95 {summary['checkout_p95_ms']} ms, "
            f"search p95 {summary['search_p95_ms']} ms, {self.appended:,} events"
        )

    async def ask(self, stop: asyncio.Event, intervals: list[Interval]) -> None:
        """`--queries-per-s` questions on a fixed schedule (open loop: a slow answer does not slow the asking,
        up to `MAX_IN_FLIGHT` unanswered), alternating checkout and search, each timed into its interval."""
        if self.args.queries_per_s <= 0:
            return
        period, n = 1 / self.args.queries_per_s, 0
        questions = self.corpus.questions(1000)
        in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        asked: set[asyncio.Task[None]] = set()
        next_at = time.perf_counter()
        while not stop.is_set():
            await in_flight.acquire()
            task = asyncio.create_task(self.ask_one(n, questions[n % len(questions)], intervals[-1]))
            asked.add(task)
            task.add_done_callback(asked.discard)
            task.add_done_callback(lambda _: in_flight.release())
            n += 1
            next_at += period
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        await asyncio.gather(*asked)

    async def ask_one(self, n: int, question: tuple[str, str | None], interval: Interval) -> None:
        text, session = question
        started = time.perf_counter()
        try:
            if n % 2 == 0:
                await self.memory.checkout(CheckoutRequest(text=text, session=session))
                interval.checkout_ms.append((time.perf_counter() - started) * 1000)
            else:
                await self.memory.query(Query(text=text, session=session))
                interval.search_ms.append((time.perf_counter() - started) * 1000)
        except Exception as error:  # counted and shown: a soak goes on
            interval.errors += 1
            if interval.errors == 1:
                console.print(f"[yellow]query failed: {error!r}[/]")


def soak_summary(
    soak: Soak, intervals: list[Interval], seconds: float, args: argparse.Namespace
) -> dict[str, Any]:
    warm_up = max(1, math.ceil(len(intervals) * 0.1))
    grown = growth(intervals, warm_up)
    window = max(1, round(WINDOW_S / args.interval)) if args.minutes >= 10 else 1
    first, last = window_p95(intervals, window, last=False), window_p95(intervals, window, last=True)
    start, end = intervals[0].mean_rss(), intervals[-1].mean_rss()
    soaked = intervals[-1].appended_at_end - args.burst
    return {
        "rss_growth_fraction": max(grown.values()) if grown else None,
        "rss_growth_by_process": grown,
        "warm_up_intervals": warm_up,
        "rss_mb_start": start,
        "rss_mb_end": end,
        "rss_mb_peak": dict(soak.peak_rss),
        "rss_mb_growth_per_10k_events": {
            name: round((end[name] - mb) / soaked * 10_000, 2) for name, mb in start.items() if name in end
        }
        if soaked
        else {},
        "checkout_p95_ms_first": first,
        "checkout_p95_ms_last": last,
        "checkout_p95_ratio_last_first": round(last / first, 3) if first and last else None,
        "checkout_window_intervals": window,
        "events_appended": soaked,
        "rate_achieved_per_s": round(soaked / seconds, 1) if seconds else 0.0,
        "query_errors": sum(i.errors for i in intervals),
        "intervals": [interval.summary() for interval in intervals],
    }


async def bench(args: argparse.Namespace, data_dir: Path) -> dict[str, Any]:
    settings = Settings(data_dir=data_dir, projectors=args.projectors, producers=args.producers)
    if args.embedder is not None:
        settings = replace(settings, embedder=args.embedder)
    if args.buffer_pool_mb is not None:
        settings = replace(settings, ladybug_buffer_pool_mb=args.buffer_pool_mb)
    if args.projector_batch is not None:
        settings = replace(settings, projector_batch=args.projector_batch)
    if args.projector_linger_ms is not None:
        settings = replace(settings, projector_linger_ms=args.projector_linger_ms)
    if args.mmap_threshold_kib is not None:
        settings = replace(settings, malloc_mmap_threshold_kib=args.mmap_threshold_kib)
    if args.nats_memory_limit_mb is not None:
        settings = replace(settings, nats_memory_limit_mb=args.nats_memory_limit_mb)
    if args.unbounded:
        settings = replace(
            settings,
            ladybug_buffer_pool_mb=0,
            malloc_arenas=0,
            malloc_mmap_threshold_kib=0,
            memory_trim_s=0.0,
            projector_batch=2000,
        )
    node = NodeProcess(settings)
    console.print(f"starting a node in {data_dir}")
    info = node.start(timeout=60)
    load_at_start = round(os.getloadavg()[0], 2)
    log = await EventLog.open(Settings(data_dir=data_dir, nats_url=info.nats_url))
    result: dict[str, Any] = {"benchmark": "soak"}
    try:
        soak = Soak(args, log, info.pid)
        soak.sample_rss()
        result["rss_mb_at_node_start"] = dict(soak.first_rss)
        if args.burst:
            result.update(await soak.burst())
        if args.minutes > 0:
            started = time.perf_counter()
            intervals = await soak.soak()
            result.update(soak_summary(soak, intervals, time.perf_counter() - started, args))
        server = str(log.client._server_info.get("version", "")) or server_binary_version()
    finally:
        await log.close()
        node.stop(timeout=30)
    settings_used = {
        k: v for k, v in settings.to_env().items() if "PASSWORD" not in k and "DATA_DIR" not in k
    }
    return result | {
        "config": {
            "minutes": args.minutes,
            "rate": args.rate,
            "queries_per_s": args.queries_per_s,
            "interval_s": args.interval,
            "sessions": args.sessions,
            "burst": args.burst,
            "settings": settings_used,
        },
        "machine": machine(server)
        | {"loadavg_1m_at_start": load_at_start, "loadavg_1m_at_end": os.getloadavg()[0]},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="eventloom-soak-"))
    try:
        result = asyncio.run(bench(args, tmp / "data"))
    finally:
        if args.keep:
            console.print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
