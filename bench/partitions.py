"""Partitioned graph projector workers on Neo4j: the rate with 1 and with 2 worker processes; one JSON object.

A node (embedded NATS + ledger mirror; projectors and producers off) runs apart, and bench/load.py appends
`--events` realistic events to `--sessions` sessions from a third process. Then, for each worker count,
the graph is emptied and `eventloom projector run graph --partitions ...` runs in that many processes,
each on its own share of the stream's partitions (chosen so that the shares hold as many events as the
sessions allow), all writing the same Neo4j database (`NEO4J_URI`, or a server provisioned the way the
tests do it). The rate is the events applied (read from the checkpoints) over the time from starting the
workers until the last event is in the graph (process start-up included); `steady_events_per_s` counts
from the first sample at 10 % or more (null when the checkpoints jumped past it in one batch). The first
worker count runs once untimed before the measured runs (`warmup`): on a freshly started server the first
run took twice the CPU per event in Neo4j, whichever worker count it was.
Progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import neo4j
from common import console, load_process, load_records, machine, progress_bar, server_binary_version
from load import CHUNK

from eventloom.bus.stream import partition_of
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from readmodels.backends import neo4j_store
from readmodels.neo4j.local import Neo4jEndpoint, provision_neo4j

PREFIX = "part"
POLL_S = 0.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events to append and project (20000)")
    parser.add_argument("--sessions", type=int, default=16, help="sessions (default 16)")
    parser.add_argument("--workers", default="1,2", help="worker counts to measure, in order (default 1,2)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds allowed per run (900)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def shares(sessions: list[str], partitions: int, workers: int) -> list[list[int]]:
    """Partitions per worker, the busiest partitions first to the least loaded worker (sessions are equal)."""
    load: dict[int, int] = {}
    for session in sessions:
        load[partition_of(session, partitions)] = load.get(partition_of(session, partitions), 0) + 1
    owned: list[list[int]] = [[] for _ in range(workers)]
    weight = [0] * workers
    for partition in sorted(range(partitions), key=lambda p: -load.get(p, 0)):
        least = weight.index(min(weight))
        owned[least].append(partition)
        weight[least] += load.get(partition, 0)
    return [sorted(part) for part in owned]


@dataclass
class Run:
    workers: int
    partitions: list[list[int]]
    sessions_per_worker: list[int]
    seconds: float
    steady: tuple[float, int] | None  # (seconds, events) from the first sample at 10 % or more
    cpu_busy: float
    worker_cpu_s: list[float]
    neo4j_cpu_s: float | None

    def summary(self, total: int) -> dict[str, Any]:
        return {
            "workers": self.workers,
            "partitions": [",".join(map(str, part)) for part in self.partitions],
            "sessions_per_worker": self.sessions_per_worker,
            "seconds": round(self.seconds, 3),
            "events_per_s": round(total / self.seconds, 1),
            "steady_events_per_s": None if self.steady is None else round(self.steady[1] / self.steady[0], 1),
            "machine_cpu_busy": round(self.cpu_busy, 3),
            "worker_cpu_s": [round(cpu, 1) for cpu in self.worker_cpu_s],
            "neo4j_cpu_s": None if self.neo4j_cpu_s is None else round(self.neo4j_cpu_s, 1),
        }


def cpu_ticks() -> tuple[int, int]:
    """(busy, all) jiffies of the whole machine, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def neo4j_pid(endpoint: Neo4jEndpoint) -> int | None:
    """The local server's JVM (its launcher's command line names the Bolt port), to account its CPU."""
    if endpoint.source != "local":
        return None
    port = endpoint.uri.rsplit(":", 1)[-1]
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit():
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if b"Neo4jLauncher" in argv and port.encode() in argv:
                    return int(entry.name)
    return None


def process_cpu_s(pid: int) -> float:
    with contextlib.suppress(OSError, IndexError, ValueError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


async def append(root: Path, nats_url: str, total: int, sessions: int) -> None:
    options = ("--prefix", PREFIX, "--sessions", str(sessions), "--events", str(total))
    load = await load_process(root, nats_url, *options)
    with progress_bar() as progress:
        task = progress.add_task("append", total=total, rate="")
        async for record in load_records(load):
            if "seq" in record:
                progress.advance(task, CHUNK)


async def applied(driver: neo4j.AsyncDriver) -> int:
    records, _, _ = await driver.execute_query(
        "MATCH (c:Checkpoint {projector: 'graph'}) WHERE c.session STARTS WITH $prefix "
        "RETURN sum(c.seq) AS done",
        {"prefix": f"{PREFIX}-"},
    )
    return int(records[0]["done"] or 0)


async def reset(settings: Settings) -> None:
    """An empty graph and no graph consumer left from a run before."""
    async with neo4j_store(settings) as store:
        await store.clear()
    async with await EventLog.open(settings, persistent=False) as log:
        js = log.client.jetstream()
        for info in await js.consumers_info(log.layout.name):
            name = info.name or ""
            if name.startswith("projector-graph"):
                await js.delete_consumer(log.layout.name, name)


def start_worker(settings: Settings, partitions: list[int], log_file: Path) -> subprocess.Popen[bytes]:
    command = [str(Path(sys.executable).with_name("eventloom")), "projector", "run", "graph"]
    command += ["--partitions", ",".join(map(str, partitions))]
    with open(log_file, "ab") as log:
        return subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **settings.to_env()}
        )


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> list[float]:
    used = [process_cpu_s(worker.pid) for worker in workers]
    for worker in workers:
        worker.send_signal(signal.SIGINT)
    for worker in workers:
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return used


async def measure(
    settings: Settings, endpoint: Neo4jEndpoint, count: int, sessions: list[str], total: int, timeout: float
) -> Run:
    await reset(settings)
    parts = shares(sessions, settings.partitions, count)
    owned = [sum(partition_of(s, settings.partitions) in part for s in sessions) for part in parts]
    console.print(f"{count} worker(s): partitions {parts}, sessions {owned}")
    server = neo4j_pid(endpoint)
    server_cpu = None if server is None else process_cpu_s(server)
    busy0, all0 = cpu_ticks()
    started = time.monotonic()
    workers = [
        start_worker(settings, part, settings.data_dir / f"worker-{count}-{n}.log")
        for n, part in enumerate(parts)
    ]
    steady_from: tuple[float, int] | None = None
    try:
        async with neo4j.AsyncGraphDatabase.driver(
            endpoint.uri, auth=(endpoint.user, endpoint.password)
        ) as driver:
            with progress_bar() as progress:
                task = progress.add_task(f"{count} worker(s)", total=total, rate="")
                while (done := await applied(driver)) < total:
                    now = time.monotonic()
                    if steady_from is None and done >= total // 10:
                        steady_from = (now, done)
                    if now - started > timeout or any(w.poll() is not None for w in workers):
                        raise RuntimeError(
                            f"{count} worker(s): {done} of {total} events after {now - started:.0f}s"
                        )
                    progress.update(task, completed=done, rate=f"{done / (now - started):.0f}/s")
                    await asyncio.sleep(POLL_S)
                progress.update(task, completed=done)
        ended = time.monotonic()
        busy1, all1 = cpu_ticks()
        if server is not None and server_cpu is not None:
            server_cpu = process_cpu_s(server) - server_cpu
    finally:
        worker_cpu = stop_workers(workers)
    return Run(
        workers=count,
        partitions=parts,
        sessions_per_worker=owned,
        seconds=ended - started,
        steady=None if steady_from is None else (ended - steady_from[0], total - steady_from[1]),
        cpu_busy=(busy1 - busy0) / max(1, all1 - all0),
        worker_cpu_s=worker_cpu,
        neo4j_cpu_s=server_cpu,
    )


async def bench(args: argparse.Namespace, root: Path, endpoint: Neo4jEndpoint) -> dict[str, Any]:
    node = NodeProcess(Settings(data_dir=root / "data", projectors="none", producers="none"))
    info = node.start()
    try:
        total = args.events // args.sessions * args.sessions
        console.print(f"appending {total} events to {args.sessions} sessions")
        await append(root, info.nats_url, total, args.sessions)
        settings = Settings(
            data_dir=root / "data",
            nats_url=info.nats_url,
            projectors="graph",
            producers="none",
            graph_backend="neo4j",
            neo4j_uri=endpoint.uri,
            neo4j_user=endpoint.user,
            neo4j_password=endpoint.password,
        )
        sessions = [f"{PREFIX}-{n}" for n in range(args.sessions)]
        counts = [int(part) for part in args.workers.split(",")]
        console.print("warm-up (untimed): a fresh server's first run pays for its JIT and plan caches")
        warmup = await measure(settings, endpoint, counts[0], sessions, total, args.timeout)
        runs = [await measure(settings, endpoint, count, sessions, total, args.timeout) for count in counts]
    finally:
        node.stop()
    return {**report(args, total, runs, endpoint), "warmup": warmup.summary(total)}


def report(args: argparse.Namespace, total: int, runs: list[Run], endpoint: Neo4jEndpoint) -> dict[str, Any]:
    summaries = {f"workers_{run.workers}": run.summary(total) for run in runs}
    rates = {run.workers: run.summary(total)["events_per_s"] for run in runs}
    result: dict[str, Any] = {"benchmark": "partitions", "events": total, "sessions": args.sessions}
    for count, rate in rates.items():
        result[f"workers_{count}_events_per_s"] = rate
    if 1 in rates and 2 in rates:
        result["speedup"] = round(rates[2] / rates[1], 3)
    result.update(summaries)
    result["neo4j"] = {"source": endpoint.source, "driver": neo4j.__version__}
    result["machine"] = machine(server_binary_version())
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="eventloom-bench-partitions-"))
    try:
        with provision_neo4j() as endpoint:
            console.print(f"Neo4j: {endpoint.uri} ({endpoint.source})")
            result = asyncio.run(bench(args, root, endpoint))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
