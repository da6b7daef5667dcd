"""What bench/soak.py watches: the resident memory of the node's processes, the consumers' lag, and the
per-interval series it summarizes. Not a benchmark."""

from __future__ import annotations

import contextlib
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client

MB = 1024 * 1024


def rss_mb(pid: int) -> float | None:
    """Resident memory (VmRSS) of `pid` in MB, None when it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None


def resident_by_mapping(pid: int, top: int = 8) -> dict[str, float]:
    """Where `pid`'s resident memory is, in MB: glibc's main heap, the anonymous mappings (allocator arenas,
    engines' pools, Python's), the files mapped (libraries, databases), and the `top` largest anonymous
    mappings by their address and virtual size, so that one can tell an arena (64 MB) from a pool."""
    kinds: dict[str, float] = {"heap": 0.0, "anonymous": 0.0, "files": 0.0, "stacks": 0.0}
    anonymous: list[tuple[float, str]] = []
    with contextlib.suppress(OSError):
        mapping, virtual_mb = "", 0.0
        for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):
                start, end = (int(bound, 16) for bound in fields[0].split("-"))
                mapping, virtual_mb = (fields[5] if len(fields) > 5 else ""), (end - start) / MB
                address = fields[0].split("-")[0]
            elif fields[0] == "Rss:":
                mb = int(fields[1]) / 1024
                kind = _mapping_kind(mapping)
                kinds[kind] += mb
                if kind == "anonymous" and mb >= 1:
                    anonymous.append((mb, f"anon {address} ({virtual_mb:,.0f} MB virtual)"))
    largest = {name: round(mb, 1) for mb, name in sorted(anonymous, reverse=True)[:top]}
    return {**{kind: round(mb, 1) for kind, mb in kinds.items()}, **largest}


def _mapping_kind(mapping: str) -> str:
    if mapping == "[heap]":
        return "heap"
    if mapping.startswith("[stack") or mapping in {"[vvar]", "[vdso]", "[vsyscall]"}:
        return "stacks"
    return "files" if mapping.startswith("/") else "anonymous"


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError):
                found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _label(pid: int) -> str:
    with contextlib.suppress(OSError):
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"nats-server" in command[0]:
            return "nats_server"
    return f"worker_{pid}"


def node_processes(node_pid: int) -> dict[str, int]:
    """The node and every process below it (nats-server, workers), by a stable name."""
    processes = {"node": node_pid}
    pending = [node_pid]
    while pending:
        for child in _children(pending.pop()):
            processes[_label(child)] = child
            pending.append(child)
    return processes


async def consumer_lag(client: Client, stream: str) -> dict[str, int]:
    """Per durable consumer of `stream`: messages not yet delivered plus delivered but unacknowledged."""
    js = client.jetstream(timeout=10)
    lags: dict[str, int] = {}
    with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
        for info in await js.consumers_info(stream):
            lags[info.name] = int(info.num_pending or 0) + int(info.num_ack_pending or 0)
    return lags


def p95(samples: list[float]) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2)


@dataclass
class Interval:
    """One reporting interval: RSS samples per process, latencies, lag at its end, events appended."""

    index: int
    started_s: float
    rss: dict[str, list[float]] = field(default_factory=dict)
    checkout_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)
    errors: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    appended_at_end: int = 0

    def sample(self, rss: dict[str, float | None]) -> None:
        for name, mb in rss.items():
            if mb is not None:
                self.rss.setdefault(name, []).append(mb)

    def mean_rss(self) -> dict[str, float]:
        return {name: round(statistics.fmean(mbs), 1) for name, mbs in self.rss.items() if mbs}

    def summary(self) -> dict[str, Any]:
        return {
            "interval": self.index,
            "started_s": round(self.started_s, 1),
            "rss_mb": self.mean_rss(),
            "lag_max": max(self.lag.values(), default=0),
            "lag": self.lag,
            "checkout_p95_ms": p95(self.checkout_ms),
            "search_p95_ms": p95(self.search_ms),
            "queries": len(self.checkout_ms) + len(self.search_ms),
            "query_errors": self.errors,
            "events_appended": self.appended_at_end,
        }


def growth(intervals: list[Interval], warm_up: int) -> dict[str, float]:
    """Per process: (mean RSS of the last interval - mean RSS of the last warm-up interval) / the latter."""
    if len(intervals) <= warm_up:
        return {}
    base, last = intervals[warm_up - 1].mean_rss(), intervals[-1].mean_rss()
    return {name: round((last[name] - mb) / mb, 4) for name, mb in base.items() if name in last and mb}


def window_p95(intervals: list[Interval], count: int, *, last: bool) -> float | None:
    """Checkout p95 over the first (or the last) `count` intervals."""
    chosen = intervals[-count:] if last else intervals[:count]
    return p95([ms for interval in chosen for ms in interval.checkout_ms])
