"""LadybugDB folds its WAL when the projector is idle, not inside the commit of a batch others wait behind,
and folds after a number of commits or events too: until then the engine holds every commit in memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.graph.projector import GraphProjector
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.embedded.ladybug_checkpoints import CheckpointPolicy, Uncheckpointed
from tests.runtime_support import drained, running
from tests.test_graph_support import SessionLog, fact, project

pytestmark = pytest.mark.anyio


NEVER = 1 << 40
IDLE_BY_WAL = CheckpointPolicy(NEVER, NEVER, NEVER, idle_wal_bytes=1, idle_commits=NEVER, idle_events=NEVER)


def wal(path: Path) -> int:
    wal_file = path.with_name(path.name + ".wal")
    return wal_file.stat().st_size if wal_file.exists() else 0


async def test_idle_folds_the_wal_that_commits_leave_alone(tmp_path: Path) -> None:
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    for n in range(30):
        log.add("memory.fact.asserted", fact((f"svc-{n % 4}", "service", f"rev {n}")))
    async with LadybugGraphStore(path, checkpoints=IDLE_BY_WAL) as store:
        await project(store, log.events, batch=5)
        assert wal(path) > 0 and "checkpoint" not in store.stages.calls  # commits alone never fold
        await store.idle()
        assert wal(path) < 1024 and store.stages.calls["checkpoint"] == 1
        await store.idle()  # nothing new to fold
        assert store.stages.calls["checkpoint"] == 1
        assert len(await store.events("s")) == 30


async def test_a_commit_past_the_threshold_folds_it(tmp_path: Path) -> None:
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    log.add("memory.fact.asserted", fact(("auth", "service", "v1")))
    policy = CheckpointPolicy(1, NEVER, NEVER, idle_wal_bytes=NEVER, idle_commits=NEVER, idle_events=NEVER)
    async with LadybugGraphStore(path, checkpoints=policy) as store:
        await project(store, log.events)
        assert store.stages.calls["checkpoint"] == 1 and wal(path) < 1024


async def test_the_runner_lets_an_idle_store_fold_its_wal(log: EventLog, settings: Settings) -> None:
    path = settings.data_dir / "idle" / "graph.lbug"
    store = LadybugGraphStore(path, checkpoints=IDLE_BY_WAL)
    notes = [
        AppendRequest(session="w", type="note.added", actor="agent", payload={"text": f"n{n}"})
        for n in range(20)
    ]
    await log.append_many(notes)
    async with running(log, GraphProjector(store)) as runner:
        await drained(log, runner.consumer)
        for _ in range(100):  # the runner finds nothing more to apply, and says so
            if store.stages.calls.get("checkpoint"):
                break
            await asyncio.sleep(0.05)
        assert store.stages.calls.get("checkpoint") == 1 and wal(path) < 1024


async def test_a_busy_store_folds_after_enough_commits_whatever_its_log(tmp_path: Path) -> None:
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    for n in range(7):
        log.add("memory.fact.asserted", fact((f"svc-{n}", "service", f"rev {n}")))
    policy = CheckpointPolicy(NEVER, commits=3, events=NEVER, idle_wal_bytes=NEVER, idle_commits=NEVER)
    async with LadybugGraphStore(path, checkpoints=policy) as store:
        await project(store, log.events, batch=1)
        assert store.stages.calls["checkpoint"] == 2  # after the 3rd and the 6th commit
        assert len(await store.events("s")) == 7


def test_when_a_checkpoint_is_due(tmp_path: Path) -> None:
    database = tmp_path / "db.lbug"
    policy = CheckpointPolicy(
        wal_bytes=100, commits=4, events=50, idle_wal_bytes=10, idle_commits=2, idle_events=20
    )
    held = Uncheckpointed(database, policy)
    assert not held.due(idle=True) and not held.due(idle=False)  # nothing committed, no log
    held.committed(5)
    assert not held.due(idle=True) and not held.due(idle=False)
    held.committed(5)
    assert held.due(idle=True) and not held.due(idle=False)  # two commits: idle folds them
    held.committed(45)
    assert held.due(idle=False)  # 55 events
    held.checkpointed()
    assert not held.due(idle=True)
    for _ in range(4):
        held.committed(0)
    assert held.due(idle=False)  # four commits of nothing still hold memory
    held.checkpointed()
    database.with_name("db.lbug.wal").write_bytes(b"x" * 11)
    assert held.due(idle=True) and not held.due(idle=False)  # a log left from before, folded when idle


REOPEN_AFTER_20 = CheckpointPolicy(
    NEVER, NEVER, NEVER, idle_wal_bytes=1, idle_commits=NEVER, idle_events=NEVER, reopen_events=20
)


async def test_an_idle_store_reopens_its_database_after_enough_events_while_reads_wait(
    tmp_path: Path,
) -> None:
    """The engine's buffer pool hands back its pages only when the database closes: after 20 events an
    idle store checkpoints, then closes and opens it; reads asked meanwhile wait and see everything."""
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    for n in range(40):
        log.add("memory.fact.asserted", fact((f"svc-{n % 4}", "service", f"rev {n}")))
    async with LadybugGraphStore(path, checkpoints=REOPEN_AFTER_20) as store:
        await project(store, log.events[:15], batch=5)
        await store.idle()
        assert store.stages.calls["checkpoint"] == 1 and "reopen" not in store.stages.calls  # 15 < 20
        await project(store, log.events[15:30], batch=5)
        idle = asyncio.ensure_future(store.idle())  # first in line: the reads queue behind its hold
        seen = await asyncio.gather(*(store.events("s") for _ in range(12)))
        await idle
        assert store.stages.calls["reopen"] == 1
        assert all(len(events) == 30 for events in seen)
        await project(store, log.events[30:], batch=5)  # writes go on after the reopen
        await store.idle()
        assert store.stages.calls["reopen"] == 1  # 10 more: not yet
        assert [e.seq for e in await store.events("s")] == list(range(1, 41))


REOPEN_AFTER_20_IDLE_BOUNDS_NEVER_MET = CheckpointPolicy(
    NEVER, NEVER, NEVER, idle_wal_bytes=NEVER, idle_commits=NEVER, idle_events=NEVER, reopen_events=20
)


async def test_a_catch_up_tail_below_the_idle_bounds_is_checkpointed_so_the_reopen_happens(
    tmp_path: Path,
) -> None:
    """The last commits of a catch-up are usually fewer than the idle bounds: once the reopen is due they
    are checkpointed anyway, or the store would keep its buffer pool until the next trickle of 128 commits
    (what left a node at 1.2 GB instead of ~0.65 GB after 100,000 events, one run in two)."""
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    for n in range(25):
        log.add("memory.fact.asserted", fact((f"svc-{n % 4}", "service", f"rev {n}")))
    async with LadybugGraphStore(path, checkpoints=REOPEN_AFTER_20_IDLE_BOUNDS_NEVER_MET) as store:
        await project(store, log.events[:15], batch=5)
        await store.idle()
        assert "reopen" not in store.stages.calls and "checkpoint" not in store.stages.calls  # 15 < 20
        await project(store, log.events[15:], batch=5)
        await store.idle()
        assert store.stages.calls["checkpoint"] == 1 and store.stages.calls["reopen"] == 1
        assert wal(path) < 1024
        assert [e.seq for e in await store.events("s")] == list(range(1, 26))


def test_a_due_reopen_makes_an_idle_checkpoint_due(tmp_path: Path) -> None:
    held = Uncheckpointed(tmp_path / "db.lbug", REOPEN_AFTER_20_IDLE_BOUNDS_NEVER_MET)
    held.committed(19)
    assert not held.due(idle=True) and not held.reopen_due()
    held.committed(1)
    assert held.due(idle=True) and not held.due(idle=False) and not held.reopen_due()
    held.checkpointed()
    assert held.reopen_due() and not held.due(idle=True)
    held.reopened()
    assert not held.reopen_due()
