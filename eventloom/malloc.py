"""Handing freed memory back to the system: two glibc arenas, a fixed mmap threshold, a periodic trim.

A node runs many threads (LadybugDB's and SQLite's writers and readers, the embedder, asyncio's executor),
and glibc gives each contending thread its own 64 MiB arena. What a burst of events allocates in them
(decoded batches, query results, embeddings) is freed, but stays resident: an arena only shrinks from its
top, and a few live chunks pin the rest. After a 20,000-event burst that was ~180 MB of a node's resident
memory (docs/benchmarks.md, "Issue 23: memory"). Two arenas and a trim every half minute keep it near
what is live. Elsewhere than glibc (musl, macOS) all three are no-ops.

glibc also raises its mmap threshold each time a mapped block is freed (up to 32 MiB), so after a burst's
first large buffers (fetched batches, Arrow tables, query results) later ones of the same size come from the
arenas, where they leave holes that pin pages. A fixed threshold keeps every block above it mapped on its own
and unmapped when freed (docs/benchmarks.md, "a fixed mmap threshold").
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc
import logging
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)
_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_M_ARENA_MAX = -8


@cache
def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it)
    except (OSError, AttributeError):
        return None
    return libc


def limit_arenas(arenas: int) -> bool:
    """At most `arenas` malloc arenas from now on (0: glibc's default); True if glibc took the setting."""
    libc = _glibc()
    if libc is None or arenas <= 0:
        return False
    return bool(libc.mallopt(_M_ARENA_MAX, arenas))


def fix_mmap_threshold(kib: int) -> bool:
    """Blocks of `kib` KiB or more are mapped on their own from now on, and the threshold no longer rises
    (0: glibc's sliding default); True if glibc took the setting."""
    libc = _glibc()
    if libc is None or kib <= 0:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, kib * 1024))


def trim() -> bool:
    """Return the free memory of every arena to the system; True if glibc released some."""
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


def resident_mb() -> float:
    """This process's resident memory (VmRSS) in MB, with whatever the allocators keep."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("VmRSS missing from /proc/self/status")


def live_resident_mb() -> float:
    """`resident_mb` after a collection and a `trim`: what this process holds, not what the allocator kept
    after a burst (benchmarks and memory tests measure with it)."""
    gc.collect()
    trim()
    return resident_mb()


async def trim_periodically(stop: asyncio.Event, interval_s: float) -> None:
    """`trim` every `interval_s` seconds (in a thread: it walks every arena) until `stop` is set."""
    if interval_s <= 0 or _glibc() is None:
        return
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        if not stop.is_set():
            await asyncio.to_thread(trim)
