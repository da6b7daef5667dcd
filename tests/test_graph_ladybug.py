"""LadybugDB-specific behaviour: one transaction per batch, rollback of everything (DDL too), threads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from projectors.graph.registry import extract
from readmodels.embedded import graph_store as ladybug_store
from readmodels.embedded import graph_writes as ladybug_writes
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph import writes
from readmodels.graph.protocol import GraphStoreError
from tests.test_graph_support import SessionLog, count, dump, fact, work_story

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[LadybugGraphStore]:
    graph = LadybugGraphStore(tmp_path / "graph.lbug")
    await graph.open()
    try:
        yield graph
    finally:
        await graph.close()


class Boom(RuntimeError):
    pass


async def test_a_failing_batch_leaves_neither_data_nor_checkpoint(
    store: LadybugGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = work_story()
    real = ladybug_writes.write_plan

    def write_then_fail(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)  # everything, checkpoint included, is written ...
        raise Boom("the commit never happens")

    monkeypatch.setattr(ladybug_store, "write_plan", write_then_fail)
    with pytest.raises(Boom):
        await store.apply("graph", [extract(e) for e in log.events])
    assert await store.applied_seqs("graph", ["s1"]) == {}
    for label in ("Event", "Session", "Entity", "EntityKey", "Source", "Checkpoint"):
        assert await count(store, f"(n:{label})") == 0
    monkeypatch.undo()
    assert await store.apply("graph", [extract(e) for e in log.events]) == len(log.events)


async def test_a_batch_failing_midway_keeps_the_previous_state(
    store: LadybugGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = work_story()
    await store.apply("graph", [extract(e) for e in log.events[:4]])
    before = await dump(store, "s1")

    def fail(*args: Any) -> None:
        raise Boom("disk full")

    monkeypatch.setattr(writes, "_source_and_observation_steps", fail)
    with pytest.raises(Boom):
        await store.apply("graph", [extract(e) for e in log.events[4:]])
    assert await dump(store, "s1") == before
    assert await store.applied_seqs("graph", ["s1"]) == {"s1": 4}


async def test_typed_tables_created_by_a_failed_batch_are_rolled_back_too(
    store: LadybugGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog()
    log.add("memory.fact.asserted", fact(relations=[("a", "brand_new_relation", "b")]))

    def fail(*args: Any) -> None:
        raise Boom("after the DDL")

    monkeypatch.setattr(writes, "_source_and_observation_steps", fail)
    with pytest.raises(Boom):
        await store.apply("graph", [extract(e) for e in log.events])
    tables = {row["name"] for row in await store.query("CALL show_tables() RETURN name")}
    assert "BRAND_NEW_RELATION" not in tables
    monkeypatch.undo()
    await store.apply("graph", [extract(e) for e in log.events])  # the table is created again
    assert await count(store, "(a:EntityKey)-[r:BRAND_NEW_RELATION]->(b:EntityKey)") == 1


async def test_data_and_checkpoints_survive_a_restart(tmp_path: Path) -> None:
    log = work_story()
    first = LadybugGraphStore(tmp_path / "graph.lbug")
    await first.open()
    await first.apply("graph", [extract(e) for e in log.events])
    before = await dump(first, "s1")
    await first.close()
    second = LadybugGraphStore(tmp_path / "graph.lbug")
    async with second:
        assert await second.applied_seqs("graph", ["s1"]) == {"s1": len(log.events)}
        assert await dump(second, "s1") == before
        assert await second.apply("graph", [extract(e) for e in log.events]) == 0


async def test_the_event_loop_keeps_running_while_a_batch_is_written(store: LadybugGraphStore) -> None:
    log = SessionLog()
    for n in range(400):
        log.add(
            "memory.fact.asserted",
            fact((f"entity-{n}", "thing", f"v{n}"), relations=[(f"entity-{n}", "next", "hub")]),
        )
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    started = time.perf_counter()
    await store.apply("graph", [extract(e) for e in log.events])
    elapsed = time.perf_counter() - started
    done = True
    await task
    assert ticks >= min(5, int(elapsed / 0.002))


async def test_reads_see_the_last_committed_state_during_a_write(
    store: LadybugGraphStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = work_story()
    await store.apply("graph", [extract(e) for e in log.events[:3]])
    real = ladybug_writes.write_plan
    loop = asyncio.get_running_loop()
    written = asyncio.Event()
    release = asyncio.Event()

    def slow(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        loop.call_soon_threadsafe(written.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(10)

    monkeypatch.setattr(ladybug_store, "write_plan", slow)
    applying = asyncio.create_task(store.apply("graph", [extract(e) for e in log.events[3:]]))
    await asyncio.wait_for(written.wait(), 10)
    assert len(await store.events("s1")) == 3  # uncommitted rows are invisible to readers
    release.set()
    await applying
    assert len(await store.events("s1")) == len(log.events)


async def test_a_closed_store_says_so(tmp_path: Path) -> None:
    graph = LadybugGraphStore(tmp_path / "graph.lbug")
    with pytest.raises(GraphStoreError, match="not open"):
        await graph.entities("s1")
    await graph.open()
    await graph.open()  # idempotent
    await graph.close()
    await graph.close()
    with pytest.raises(GraphStoreError, match="not open"):
        await graph.apply("graph", [extract(work_story().events[0])])


async def test_calls_made_while_the_store_opens_wait_for_it(tmp_path: Path) -> None:
    graph = LadybugGraphStore(tmp_path / "graph.lbug")
    opening = asyncio.create_task(graph.open())
    await asyncio.sleep(0)  # the open is under way (migrations run in the writer thread)
    assert await graph.entities("s1") == []
    await opening
    closing = asyncio.create_task(graph.close())
    await asyncio.sleep(0)
    with pytest.raises(GraphStoreError, match="not open"):
        await graph.entities("s1")
    await closing


async def test_batches_leave_nothing_behind_in_the_drivers_statement_cache(tmp_path: Path) -> None:
    """The driver caches each statement it prepares itself, keyed by the identity of the Arrow table a
    `LOAD FROM` scans: one entry per statement and batch, never freed (it held 21 GB at 450,000 events).
    The store prepares those statements itself; the cache (a private attribute of the driver: when a newer
    driver drops it this test checks nothing more) must not grow with the batches."""
    log = SessionLog("s")
    for n in range(40):
        log.add(
            "memory.fact.asserted",
            fact((f"svc-{n % 3}", "service", f"rev {n}"), relations=[(f"svc-{n % 3}", "owned_by", "team")]),
        )
    async with LadybugGraphStore(tmp_path / "graph.lbug") as store:
        sizes = []
        for start in range(0, 40, 4):
            await store.apply("graph", [extract(e) for e in log.events[start : start + 4]])
            sizes.append(len(getattr(store._writer, "_pybind_implicit_prepared_cache", {})))
        assert sizes[-1] == sizes[2], sizes
        assert len(await store.events("s")) == 40
