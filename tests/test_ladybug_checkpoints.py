"""LadybugDB folds its WAL when the projector is idle, not inside the commit of a batch others wait behind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.graph.projector import GraphProjector
from readmodels.embedded.graph_store import LadybugGraphStore
from tests.runtime_support import drained, running
from tests.test_graph_support import SessionLog, fact, project

pytestmark = pytest.mark.anyio


def wal(path: Path) -> int:
    wal_file = path.with_name(path.name + ".wal")
    return wal_file.stat().st_size if wal_file.exists() else 0


async def test_idle_folds_the_wal_that_commits_leave_alone(tmp_path: Path) -> None:
    path = tmp_path / "graph.lbug"
    log = SessionLog("s")
    for n in range(30):
        log.add("memory.fact.asserted", fact((f"svc-{n % 4}", "service", f"rev {n}")))
    async with LadybugGraphStore(path, checkpoint_threshold=1 << 40, idle_checkpoint_bytes=1) as store:
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
    async with LadybugGraphStore(path, checkpoint_threshold=1, idle_checkpoint_bytes=1 << 40) as store:
        await project(store, log.events)
        assert store.stages.calls["checkpoint"] == 1 and wal(path) < 1024


async def test_the_runner_lets_an_idle_store_fold_its_wal(log: EventLog, settings: Settings) -> None:
    path = settings.data_dir / "idle" / "graph.lbug"
    store = LadybugGraphStore(path, checkpoint_threshold=1 << 40, idle_checkpoint_bytes=1)
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
