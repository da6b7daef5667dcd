"""Issue 23's memory bounds: the buffer-pool setting reaches each LadybugDB database the node opens, the
settings refuse nonsense by name, and the glibc calls work where glibc is (bench/soak.py measures them)."""

from __future__ import annotations

import asyncio
import ctypes.util
import dataclasses
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from eventloom import malloc
from eventloom.bus.cluster import local_nats
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.packs.claims.projector import claims_projector
from gateway.packs.workflow.projector import workflow_projector
from gateway.workers import worker_options
from projectors.backends import graph_projector
from projectors.emitter import ProducerProjection
from projectors.log_view import RecentEvents
from projectors.plugins import PluginContext
from projectors.protocol import DerivedEvent, LogView, Projector
from tests import claims_support, workflow_support
from tests.runtime_support import drained, running
from tests.test_batched_projection import mixed

TINY_POOL_MB = 1
"""Less than the pinned pages of one database's schema: opening must fail if, and only if, it applies."""
pytestmark = pytest.mark.anyio
GLIBC = malloc._glibc() is not None


def _context(tmp_path: Path, name: str, pool_mb: int) -> PluginContext:
    return PluginContext(Settings(data_dir=tmp_path, ladybug_buffer_pool_mb=pool_mb), name)


def _first_claim() -> list[Event]:
    return list(claims_support.alice_story().events)


def _first_workflow_events() -> list[Event]:
    return list(workflow_support.rocket_story().events)


@pytest.mark.parametrize(
    ("name", "factory", "first_events"),
    [
        ("graph", graph_projector, None),  # the graph's database is opened (or created) at `open`
        ("claims", claims_projector, _first_claim),  # a pack's, by the first event it reads
        ("workflow", workflow_projector, _first_workflow_events),
    ],
)
async def test_the_buffer_pool_setting_reaches_ladybug(
    tmp_path: Path,
    name: str,
    factory: Callable[[PluginContext], Projector],
    first_events: Callable[[], list[Event]] | None,
) -> None:
    bounded = factory(_context(tmp_path / "tiny", name, TINY_POOL_MB))
    with pytest.raises(Exception, match=r"(?i)buffer pool is full"):
        await bounded.open()
        assert first_events is not None, "the graph opened in a pool too small for its schema"
        try:
            await bounded.apply(first_events())
        finally:
            await bounded.close()
    roomy = factory(_context(tmp_path / "roomy", name, 64))
    await roomy.open()  # the same schema fits in a modest pool
    if first_events is not None:
        await roomy.apply(first_events())
    await roomy.close()


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("EVENTLOOM_LADYBUG_BUFFER_POOL_MB", "-1", "ladybug_buffer_pool_mb"),
        ("EVENTLOOM_MALLOC_ARENAS", "-2", "malloc_arenas"),
        ("EVENTLOOM_MEMORY_TRIM_S", "nan", "memory_trim_s"),
        ("EVENTLOOM_MALLOC_ARENAS", "two", "EVENTLOOM_MALLOC_ARENAS"),
        ("EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB", "-1", "malloc_mmap_threshold_kib"),
        ("EVENTLOOM_MALLOC_MMAP_THRESHOLD_KIB", "32769", "malloc_mmap_threshold_kib"),
        ("EVENTLOOM_PROJECTOR_BATCH", "-1", "projector_batch"),
        ("EVENTLOOM_PROJECTOR_BATCH", "10001", "projector_batch"),
        ("EVENTLOOM_PROJECTOR_BATCH", "lots", "EVENTLOOM_PROJECTOR_BATCH"),
        ("EVENTLOOM_PROJECTOR_LINGER_MS", "-1", "projector_linger_ms"),
        ("EVENTLOOM_PROJECTOR_LINGER_MS", "10001", "projector_linger_ms"),
        ("EVENTLOOM_PROJECTOR_LINGER_MS", "2500", "projector_linger_ms"),  # half the default ack wait
        ("EVENTLOOM_NATS_MEMORY_LIMIT_MB", "-1", "nats_memory_limit_mb"),
        ("EVENTLOOM_NATS_MEMORY_LIMIT_MB", "8", "nats_memory_limit_mb"),  # below anything a server runs in
        ("EVENTLOOM_NATS_MEMORY_LIMIT_MB", str((1 << 20) + 1), "nats_memory_limit_mb"),
    ],
)
def test_memory_settings_refuse_nonsense_by_name(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, field: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=field):
        Settings.from_env()


def test_memory_settings_reach_child_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(
        data_dir=tmp_path,
        ladybug_buffer_pool_mb=512,
        malloc_arenas=4,
        malloc_mmap_threshold_kib=128,
        memory_trim_s=7.5,
        projector_batch=250,
        projector_linger_ms=50,
        nats_memory_limit_mb=96,
    )
    for variable, value in settings.to_env().items():
        monkeypatch.setenv(variable, value)
    again = Settings.from_env()
    assert (again.ladybug_buffer_pool_mb, again.malloc_arenas, again.memory_trim_s) == (512, 4, 7.5)
    assert (again.projector_batch, again.malloc_mmap_threshold_kib) == (250, 128)
    assert again.projector_linger_ms == 50
    assert worker_options(again).linger_s == 0.05
    assert again.nats_memory_limit_mb == 96


def server_memory_limit(pid: int | None) -> str | None:
    assert pid is not None
    environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    limits = [item.split(b"=", 1)[1].decode() for item in environment if item.startswith(b"GOMEMLIMIT=")]
    return limits[0] if limits else None


async def test_the_node_starts_its_nats_server_with_the_memory_limit_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOMEMLIMIT", "300MiB")  # the node's own environment, which a setting overrides
    for limit, expected in ((48, "48MiB"), (0, "300MiB")):
        settings = Settings(data_dir=tmp_path / str(limit), nats_memory_limit_mb=limit)
        server = local_nats(settings, authorization="")
        await server.start()
        try:
            assert server_memory_limit(server.pid) == expected
        finally:
            await server.stop()
    assert Settings(data_dir=tmp_path).nats_memory_limit_mb == 0  # off unless asked: bursts pay for it


def test_a_worker_batch_is_smaller_in_a_node_than_in_a_process_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node runs every worker in one process: each takes smaller batches than a worker alone in its
    process (`eventloom projector run`), unless the operator sets one size for both."""
    unset = Settings(data_dir=tmp_path)
    assert worker_options(unset).batch < worker_options(unset, sole_worker=True).batch
    for variable, value in unset.to_env().items():
        monkeypatch.setenv(variable, value)
    assert Settings.from_env().projector_batch is None  # a child process keeps choosing by its own kind
    chosen = dataclasses.replace(unset, projector_batch=123)
    assert worker_options(chosen).batch == worker_options(chosen, sole_worker=True).batch == 123


class BatchSizes:
    """A projector that records how many events each batch brought it."""

    name = "batch_sizes"

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.applied: dict[str, int] = {}

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return {s: self.applied[s] for s in sessions if s in self.applied}

    async def apply(self, events: Sequence[Event]) -> None:
        self.sizes.append(len(events))
        for event in events:
            self.applied[event.session] = event.seq


async def test_a_node_worker_holds_at_most_its_batch_setting(log: EventLog) -> None:
    """What a worker holds in memory is bounded by `EVENTLOOM_PROJECTOR_BATCH`: a backlog of 30 events
    reaches a worker made as the node makes it, with a batch of 4, four events at a time at most."""
    await log.append_many(mixed("batched", 30))
    projector = BatchSizes()
    options = worker_options(dataclasses.replace(log.settings, projector_batch=4))
    async with running(log, projector, options=options) as runner:
        await drained(log, runner.consumer)
    assert projector.applied == {"batched": 30}
    assert max(projector.sizes) == 4 and sum(projector.sizes) == 30


@pytest.mark.skipif(not GLIBC, reason="malloc_trim and M_ARENA_MAX are glibc's")
def test_trim_gives_freed_memory_back() -> None:
    assert ctypes.util.find_library("c") is not None
    held = [
        bytearray(200) for _ in range(200_000)
    ]  # ~50 MB of small chunks: not mmapped, they stay in arenas
    del held
    assert malloc.trim() is True  # something was released
    assert malloc.limit_arenas(2) is True
    assert malloc.limit_arenas(0) is False  # 0 leaves glibc's default alone


_BURST_OF_LARGE_BLOCKS = """
import sys
from eventloom import malloc

fixed = malloc.fix_mmap_threshold(int(sys.argv[1]))
del bytearray(1 << 20)[:]  # a first mapped block, freed: glibc's sliding threshold rises above 1 MiB
before = malloc.resident_mb()  # untrimmed: what stays resident is the point
large, small = [], []
for _ in range(100):  # a burst's large buffers, each followed by a small block that outlives it
    large.append(bytearray(1 << 20))
    small.append(bytearray(1000))
del large
print(fixed, round(malloc.resident_mb() - before))
"""


@pytest.mark.skipif(not GLIBC, reason="mallopt(M_MMAP_THRESHOLD) is glibc's")
@pytest.mark.parametrize(("kib", "taken", "kept_mb"), [(0, False, range(90, 110)), (256, True, range(0, 5))])
def test_a_fixed_mmap_threshold_hands_large_blocks_back_when_freed(
    kib: int, taken: bool, kept_mb: range
) -> None:
    """Without it, 100 freed 1 MiB buffers stay resident behind the small blocks allocated after them."""
    run = subprocess.run(
        [sys.executable, "-c", _BURST_OF_LARGE_BLOCKS, str(kib)], capture_output=True, text=True, check=True
    )
    fixed, kept = run.stdout.split()
    assert fixed == str(taken)
    assert int(kept) in kept_mb


async def test_trim_periodically_stops_when_asked() -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(malloc.trim_periodically(stop, 0.01))
    await asyncio.sleep(0.05)
    assert not task.done()  # it keeps trimming until stopped...
    stop.set()
    await asyncio.wait_for(task, 1)  # ...and ends promptly once stopped
    await asyncio.wait_for(malloc.trim_periodically(asyncio.Event(), 0), 1)  # 0: never, returns at once


def _unappended(session: str, seq: int) -> Event:
    """An event the stream does not hold: a view can only answer with it from memory."""
    return Event(
        v=1, session=session, seq=seq, ts="2026-11-27T00:00:00.000000Z", type="note.added", actor="agent",
        payload={"n": seq}, caused_by=[], prev_hash=None, hash=f"{seq:064x}", sig="", key_id="0" * 16,
    )  # fmt: skip


class AsksForThePredecessor:
    """A process producer that only asks its view for the event before each one."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.found: list[int | None] = []

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        previous = await log.event(event.session, event.seq - 1)
        self.found.append(None if previous is None else previous.seq)
        return []


def test_recent_events_keep_the_last_ones_only() -> None:
    recent = RecentEvents(limit=3)
    for seq in range(1, 6):
        recent.saw(_unappended("s", seq))
    recent.saw(_unappended("s", 3))  # seen again: the newest now, so 4 is the oldest
    recent.saw(_unappended("s", 6))
    assert len(recent) == 3
    assert [seq for seq in range(1, 7) if recent.get("s", seq) is not None] == [3, 5, 6]
    assert recent.get("s", 6) == _unappended("s", 6) and recent.get("other", 5) is None


async def test_the_producers_of_a_runtime_share_one_memory_of_recent_events(log: EventLog) -> None:
    """Every process producer of a runtime is given the same events: each is remembered once, for all.
    The events are not in the stream, so a predecessor found came from that memory, and it is remembered
    only once every producer had the event (none sees the one it is being given)."""
    first, second = AsksForThePredecessor("first"), AsksForThePredecessor("second")
    projection = ProducerProjection([first, second], log)
    await projection.open()
    await projection.apply([_unappended("shared", seq) for seq in range(1, 6)])
    assert first.found == second.found == [None, 1, 2, 3, 4]
    first_view, second_view = projection._views["first"], projection._views["second"]
    assert first_view._recent is second_view._recent and len(first_view._recent) == 5
