"""The graph projector through the real runtime, and `rebuild`: a fresh generation swapped in atomically."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from eventloom.dlq import list_dead_letters
from eventloom.errors import ReadModelBrokenError
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.backends import EmbeddedGraphProjector
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from readmodels.embedded.graph_bulk import LadybugBulkLoader
from tests.runtime_support import drained, running

pytestmark = pytest.mark.anyio
SNAPSHOT = (
    "MATCH (e:Entity) RETURN e.session AS s, e.name AS n, e.entity_type AS t, e.summary AS summary, "
    "e.valid_from AS f, e.valid_to AS u ORDER BY s, t, n, f"
)


def story(session: str) -> list[AppendRequest]:
    facts: list[tuple[str, dict[str, Any]]] = [
        ("goal.created", {"goal_id": "g1", "title": "Ship login"}),
        ("task.proposed", {"task_id": "t1", "title": "Refresh tokens", "goal_id": "g1"}),
        ("decision.made", {"decision_id": "d1", "title": "Refresh early", "task_id": "t1"}),
        ("command.completed", {"command": "pytest", "exit_code": 0, "task_id": "t1"}),
        ("memory.fact.asserted", {"entities": [{"name": "auth", "entity_type": "service", "summary": "v1"}]}),
        ("memory.fact.asserted", {"entities": [{"name": "auth", "entity_type": "service", "summary": "v2"}]}),
        ("task.completed", {"task_id": "t1", "summary": "done"}),
    ]
    return [AppendRequest(session=session, type=t, actor="agent", payload=p) for t, p in facts]


async def test_rebuilt_graph_equals_the_incremental_one_and_is_swapped_in_live(
    log: EventLog, settings: Settings
) -> None:
    await log.append_many(story("a") + story("b"))
    projector = load_projector("graph", settings)
    assert isinstance(projector, EmbeddedGraphProjector)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        incremental = await projector.store.query(SNAPSHOT)
        assert any(row["summary"] == "v2" and row["u"] is None for row in incremental)
        assert projector.generation == 1

        seen: list[tuple[int, int]] = []
        report = await rebuild(log, "graph", progress=lambda done, total: seen.append((done, total)))
        assert report.generation == 2 and report.events == 14 and seen[-1][0] == seen[-1][1]
        for _ in range(150):  # the live runner notices the swap and reopens on it
            if projector.generation == 2:
                break
            await asyncio.sleep(0.1)
        assert projector.generation == 2, "the live projector did not adopt the rebuilt generation"
        assert await projector.store.query(SNAPSHOT) == incremental

        await log.append_many(story("c"))  # the live projector goes on, on the new generation
        await drained(log, runner.consumer)
        after = await projector.store.query(SNAPSHOT)
        assert {row["s"] for row in after} == {"a", "b", "c"}


async def test_a_rebuild_that_breaks_is_thrown_away_and_dead_letters_nothing(
    log: EventLog, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    await log.append_many(story("a"))
    projector = load_projector("graph", settings)
    assert isinstance(projector, EmbeddedGraphProjector)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        before = await projector.store.query(SNAPSHOT)

        def broken(self: LadybugBulkLoader, shares: object) -> None:
            self._failed = "OSError: [Errno 28] No space left on device"
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(LadybugBulkLoader, "_send_sync", broken)
        with pytest.raises(ReadModelBrokenError, match="No space left"):
            await rebuild(log, "graph")
        assert not (projector.generations.state_dir / "gen-2").exists()
        assert projector.generations.current_number() == 1
        assert await list_dead_letters(log.client) == []
        consumers = [c.name async for c in _consumer_infos(log)]
        assert not [name for name in consumers if name.startswith("rebuild-")]
        assert await projector.store.query(SNAPSHOT) == before

        monkeypatch.undo()  # the next rebuild starts afresh and succeeds
        report = await rebuild(log, "graph")
        assert report.generation == 2 and report.events == len(story("a"))


async def _consumer_infos(log: EventLog) -> AsyncIterator[Any]:
    for info in await log.client.jetstream().consumers_info(log.layout.name):
        yield info
