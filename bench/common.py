"""What every benchmark script shares: the stderr console and progress bar, the machine, CPU accounting."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from eventloom.bus.embedded import nats_server_binary
from eventloom.runtime import RuntimeInfo

console = Console(stderr=True)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("{task.description:<26}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        refresh_per_second=4,
        transient=False,
    )


class CpuMeter:
    """CPU seconds (user + system) used by this process, the node process and nats-server, per phase."""

    def __init__(self, node: RuntimeInfo) -> None:
        self._pids = {"node": node.pid, "nats_server": node.nats_pid}
        self._start: dict[str, float] = {}
        self._wall = 0.0

    def _now(self) -> dict[str, float]:
        ticks = os.sysconf("SC_CLK_TCK")
        used = {"bench_client": time.process_time()}
        for name, pid in self._pids.items():
            if pid is None:
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                used[name] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        return used

    def start(self) -> None:
        self._start = self._now()
        self._wall = time.perf_counter()

    def stop(self) -> dict[str, float]:
        end = self._now()
        used = {k: round(end[k] - self._start[k], 2) for k in end if k in self._start}
        used["wall"] = round(time.perf_counter() - self._wall, 2)
        return used


def peak_rss_mb(others: dict[str, int | None], own: str = "bench") -> dict[str, float]:
    """Peak resident memory (VmHWM) of this process (named `own`) and of `others` (name -> pid), in MB."""
    peaks = {own: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for name, pid in others.items():
        with contextlib.suppress(OSError, TypeError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[name] = int(line.split()[1]) / 1024
    return {name: round(mb, 1) for name, mb in peaks.items()}


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50 (the median), p95 and max of a non-empty sample, in its unit, to 2 decimals."""
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2),
        "max": round(ordered[-1], 2),
    }


def machine(server_version: str) -> dict[str, Any]:
    cpu_model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu_model,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "nats_server": server_version,
        "nats_py": metadata.version("nats-py"),
    }


def print_report(result: dict[str, Any]) -> None:
    """Stamp `result` with this machine and the time, and print it as the one JSON line on stdout."""
    result["machine"] = machine(server_binary_version())
    result["date"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")


def server_binary_version() -> str:
    with contextlib.suppress(Exception):
        out = subprocess.run(
            [str(nats_server_binary()), "--version"], capture_output=True, text=True, timeout=10, check=False
        )
        return out.stdout.strip().removeprefix("nats-server: ")
    return "unknown"


async def load_process(root: Path, nats_url: str, *options: str) -> asyncio.subprocess.Process:
    """bench/load.py in its own process: the appends (hashing, signing, publishing) stay out of ours."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("load.py")),
        "--data-dir",
        str(root / "data"),
        "--nats-url",
        nats_url,
        *options,
        stdout=asyncio.subprocess.PIPE,
    )


async def load_records(process: asyncio.subprocess.Process) -> AsyncIterator[dict[str, Any]]:
    assert process.stdout is not None
    async for line in process.stdout:
        yield msgspec.json.decode(line)
    if await process.wait() != 0:
        raise RuntimeError(f"bench/load.py exited with {process.returncode}")
