"""Batched incremental projection writes exactly what a rebuild writes, and a crash between a batch's write
and its acknowledgement re-applies nothing: on LadybugDB and on Neo4j, through the real runner and stream."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.backends import EmbeddedGraphProjector
from projectors.graph.rebuild_neo4j import rebuild_neo4j_from_stream
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from projectors.runner import RunnerOptions
from readmodels.neo4j.graph_store import Neo4jGraphStore
from tests.crash_projector import ACK_WAIT_S
from tests.runtime_support import drained, running
from tests.test_graph_bulk import graph_rows
from tests.test_graph_support import dump

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio
SESSIONS = ("m0", "m1", "m2")
ROOT = Path(__file__).resolve().parent.parent


def mixed(session: str, count: int) -> list[AppendRequest]:
    """An agent session's mix: facts re-asserted with new summaries (versions under standing edges), tasks,
    decisions about them, commands run for them, conversation turns."""
    requests = []
    for n in range(count):
        task = f"t{n // 12}"
        choices: list[tuple[str, dict[str, Any]]] = [
            (
                "memory.fact.asserted",
                {
                    "entities": [
                        {"name": f"svc-{n % 5}", "entity_type": "service", "summary": f"rev {n // 10}"},
                        {"name": f"team-{n % 3}", "entity_type": "team", "summary": "owners"},
                    ],
                    "relations": [
                        {"source": f"svc-{n % 5}", "target": f"team-{n % 3}", "relation_type": "owned_by"}
                    ],
                },
            ),
            ("task.proposed", {"task_id": task, "title": f"Task {task}", "goal_id": "g1"}),
            ("decision.made", {"decision_id": f"d{n}", "title": f"Decision {n}", "task_id": task}),
            ("command.completed", {"command": f"pytest -k c{n}", "exit_code": n % 2, "task_id": task}),
            ("transcript.turn", {"role": "assistant", "text": f"Turn {n} on {task}"}),
        ]
        kind, payload = choices[n % 5]
        requests.append(AppendRequest(session=session, type=kind, actor="agent", payload=payload))
    return requests


async def appended(log: EventLog, per_session: int = 120) -> None:
    for start in range(0, per_session, 40):
        await log.append_many([r for s in SESSIONS for r in mixed(s, per_session)[start : start + 40]])


def crash_after(settings: Settings, batches: int, batch: int) -> None:
    """A projector worker process that writes `batches` batches and dies before acknowledging the last."""
    env = {**os.environ, **settings.to_env()}
    done = subprocess.run(
        [sys.executable, "-m", "tests.crash_projector", str(batches), str(batch)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -9, done.stderr[-2000:]


@pytest.mark.parametrize("batch", [7, 2000])
async def test_batched_incremental_projection_equals_a_rebuild_on_ladybug(
    log: EventLog, settings: Settings, batch: int
) -> None:
    await appended(log)
    projector = load_projector("graph", settings)
    assert isinstance(projector, EmbeddedGraphProjector)
    async with running(log, projector, options=RunnerOptions(batch=batch, fetch_timeout_s=0.2)) as runner:
        await drained(log, runner.consumer)
        assert runner.stats.applied == 360 and runner.stats.batches >= 360 // batch
    live = projector.generations.current()
    report = await rebuild(log, "graph")
    assert report.events == 360
    rebuilt = projector.generations.current()
    assert rebuilt != live
    incremental_rows = graph_rows(live / "graph.lbug")
    assert len(incremental_rows["Event"]) == 360 and incremental_rows["RELATES"]
    assert graph_rows(rebuilt / "graph.lbug") == incremental_rows


async def test_a_crash_between_write_and_ack_reapplies_nothing_on_ladybug(
    log: EventLog, settings: Settings
) -> None:
    await appended(log)
    await asyncio.to_thread(crash_after, settings, 3, 25)
    projector = load_projector("graph", settings)
    assert isinstance(projector, EmbeddedGraphProjector)
    async with running(
        log, projector, options=RunnerOptions(batch=25, fetch_timeout_s=0.2, ack_wait_s=ACK_WAIT_S)
    ) as runner:
        await drained(log, runner.consumer)
        assert runner.stats.skipped >= 25  # the batch written but never acknowledged came back, skipped
        assert runner.stats.applied == 360 - 75
    live = projector.generations.current()
    await rebuild(log, "graph")
    assert graph_rows(projector.generations.current() / "graph.lbug") == graph_rows(live / "graph.lbug")


@pytest.fixture
def neo4j_settings(settings: Settings, neo4j_endpoint: Neo4jEndpoint) -> Settings:
    return dataclasses.replace(
        settings,
        graph_backend="neo4j",
        embedder="hash",
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )


async def neo4j_graph(settings: Settings) -> dict[str, Any]:
    async with Neo4jGraphStore(
        settings.neo4j_uri or "", user=settings.neo4j_user, password=settings.neo4j_password
    ) as store:
        sessions = {session: await dump(store, session) for session in SESSIONS}
        checkpoints = await store.applied_seqs("graph", list(SESSIONS))
    return {"sessions": sessions, "checkpoints": checkpoints}


async def test_batched_projection_and_a_crash_reapply_nothing_on_neo4j(neo4j_settings: Settings) -> None:
    async with Neo4jGraphStore(
        neo4j_settings.neo4j_uri or "", user=neo4j_settings.neo4j_user, password=neo4j_settings.neo4j_password
    ) as store:
        await store.clear()
    async with await EventLog.open(neo4j_settings) as log:
        await appended(log)
        await asyncio.to_thread(crash_after, neo4j_settings, 2, 40)
        projector = load_projector("graph", neo4j_settings)
        options = RunnerOptions(batch=500, fetch_timeout_s=0.2, ack_wait_s=ACK_WAIT_S)
        async with running(log, projector, options=options) as runner:
            await drained(log, runner.consumer)
            assert runner.stats.skipped >= 40 and runner.stats.applied == 360 - 80
        incremental = await neo4j_graph(neo4j_settings)
        assert incremental["checkpoints"] == {session: 120 for session in SESSIONS}
        assert sum(len(s["events"]) for s in incremental["sessions"].values()) == 360
        report = await rebuild_neo4j_from_stream(log)
        assert report.events == 360
    assert await neo4j_graph(neo4j_settings) == incremental
