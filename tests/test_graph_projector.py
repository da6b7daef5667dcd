"""`GraphProjector`: the `Projector` plug-in contract on top of a real graph store."""

from __future__ import annotations

from pathlib import Path

import pytest

from projectors.graph import GraphProjector
from projectors.protocol import Projector
from readmodels.embedded.graph_store import LadybugGraphStore
from tests.test_graph_support import SessionLog, dump, work_story

pytestmark = pytest.mark.anyio


async def test_the_graph_projector_is_a_projector_with_exactly_once_effects(tmp_path: Path) -> None:
    projector = GraphProjector(LadybugGraphStore(tmp_path / "graph.lbug"))
    assert isinstance(projector, Projector)
    assert projector.name == "graph"
    log = work_story()
    other = SessionLog("s2")
    other.add("session.started", {"agent": "codex"})
    await projector.open()
    try:
        assert await projector.applied_seqs(["s1", "s2"]) == {}
        await projector.apply([*log.events[:5], *other.events])
        assert await projector.applied_seqs(["s1", "s2"]) == {"s1": 5, "s2": 1}
        await projector.apply(log.events)  # redelivery of 1..5 together with the rest
        before = await dump(projector.store, "s1")
        await projector.apply(log.events)
        assert await dump(projector.store, "s1") == before
        assert await projector.applied_seqs(["s1"]) == {"s1": len(log.events)}
        assert [e.seq for e in await projector.store.events("s2")] == [1]
    finally:
        await projector.close()


async def test_projectors_with_different_names_keep_separate_checkpoints(tmp_path: Path) -> None:
    store = LadybugGraphStore(tmp_path / "graph.lbug")
    first, second = GraphProjector(store, name="graph"), GraphProjector(store, name="graph-shadow")
    await first.open()
    try:
        await first.apply(work_story().events[:2])
        assert await second.applied_seqs(["s1"]) == {}
        assert await first.applied_seqs(["s1"]) == {"s1": 2}
    finally:
        await first.close()
