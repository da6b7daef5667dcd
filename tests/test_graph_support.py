"""Shared by the graph tests (no tests here): the backend fixtures, real hash-chained events, dumps.

`graph_store` is parametrized by backend, so the whole contract suite (tests/test_graph_contract*.py)
runs on LadybugDB and on a real Neo4j server (`neo4j_endpoint`, provisioned once per test run). Neo4j
community has one database, so each Neo4j store starts from an emptied one: tests run one at a time.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from eventloom.event import Event, compute_hash, utc_timestamp
from projectors.graph.registry import extract
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.protocol import GraphStore
from readmodels.neo4j.graph_store import Neo4jGraphStore

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

T0 = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)


def ts(second: float) -> str:
    """The canonical timestamp `second` seconds after 2025-05-01T09:00:00Z."""
    return utc_timestamp(T0 + timedelta(seconds=second))


class SessionLog:
    """Builds a session's events the way the appender does: contiguous seqs, hash chain, one per second."""

    def __init__(self, session: str = "s1") -> None:
        self.session = session
        self.events: list[Event] = []

    def add(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        at: float | None = None,
        actor: str = "agent",
        caused_by: Sequence[str] = (),
    ) -> Event:
        seq = len(self.events) + 1
        draft = Event(
            v=1,
            session=self.session,
            seq=seq,
            ts=ts(at if at is not None else seq),
            type=type,
            actor=actor,
            payload=payload,
            caused_by=list(caused_by),
            prev_hash=self.events[-1].hash if self.events else None,
            hash="",
            sig="",
            key_id="",
        )
        event = msgspec.structs.replace(draft, hash=compute_hash(draft))
        self.events.append(event)
        return event


async def count(
    store: GraphStore, pattern: str, where: str = "", params: dict[str, Any] | None = None
) -> int:
    """How many matches of a Cypher pattern (portable Cypher: runs on every backend)."""
    rows = await store.query(f"MATCH {pattern} {where} RETURN count(*) AS n", params)
    return int(rows[0]["n"])


async def dump(store: GraphStore, session: str) -> dict[str, Any]:
    """Everything the typed reads can see of a session, including closed versions and edges."""
    entity_rows = await store.query(
        "MATCH (e:Entity) WHERE e.session = $s RETURN e.uid AS uid, e.name AS name, e.entity_type AS type, "
        "e.summary AS summary, e.properties AS properties, e.valid_from AS valid_from, "
        "e.valid_to AS valid_to, e.version AS version ORDER BY uid",
        {"s": session},
    )
    edge_rows = await store.query(
        "MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE r.session = $s "
        "RETURN r.uid AS uid, a.key AS a, b.key AS b, r.relation_type AS type, r.valid_from AS valid_from, "
        "r.valid_to AS valid_to, r.confidence AS confidence ORDER BY uid",
        {"s": session},
    )
    return {
        "events": [msgspec.to_builtins(e) for e in await store.events(session)],
        "entities": entity_rows,
        "edges": edge_rows,
        "sources": [msgspec.to_builtins(s) for s in await store.sources(session)],
        "spine_links": await count(
            store, "(a:Event)-[:NEXT_EVENT]->(b:Event)", "WHERE a.session = $s", {"s": session}
        ),
        "version_links": await count(store, "(a:Entity)-[:SUPERSEDED_BY]->(b:Entity)"),
        "versions_of_entities": await count(store, "(k:EntityKey)-[:HAS_VERSION]->(e:Entity)"),
        "projected": await count(store, "(v:Event)-[:PROJECTED_ENTITY]->(e:Entity)"),
        "projected_relations": await store.query(
            "MATCH (v:Event)-[p:PROJECTED_RELATION]->(k:EntityKey) WHERE v.session = $s RETURN v.seq AS seq, "
            "p.uid AS uid, p.action AS action, k.key AS source, p.target_key AS target, "
            "p.valid_from AS valid_from, p.valid_to AS valid_to ORDER BY seq, uid, action",
            {"s": session},
        ),
    }


BACKENDS = ["ladybug", "neo4j"]
HASH_A = "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea"
FreshStore = Callable[[Path], AbstractAsyncContextManager[GraphStore]]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def fresh_store(backend: str, request: pytest.FixtureRequest) -> FreshStore:
    """Opens an empty store of `backend` (LadybugDB: under the given directory)."""
    endpoint: Neo4jEndpoint | None = None
    if backend == "neo4j":
        endpoint = request.getfixturevalue("neo4j_endpoint")

    @asynccontextmanager
    async def fresh(root: Path) -> AsyncIterator[GraphStore]:
        store: GraphStore
        if endpoint is None:
            store = LadybugGraphStore(root / "graph.lbug")
            await store.open()
        else:
            store = Neo4jGraphStore(endpoint.uri, user=endpoint.user, password=endpoint.password)
            await store.open()
            await store.clear()
        try:
            yield store
        finally:
            await store.close()

    return fresh


@pytest.fixture
async def graph_store(fresh_store: FreshStore, tmp_path: Path) -> AsyncIterator[GraphStore]:
    async with fresh_store(tmp_path / "store") as store:
        yield store


async def project(store: GraphStore, events: Sequence[Event], batch: int = 500, name: str = "graph") -> int:
    applied = 0
    for start in range(0, len(events), batch):
        applied += await store.apply(name, [extract(event) for event in events[start : start + batch]])
    return applied


def fact(
    *entities: tuple[str, str, str | None], relations: Sequence[tuple[str, str, str]] = ()
) -> dict[str, Any]:
    return {
        "entities": [
            {"name": name, "entity_type": kind, **({"summary": summary} if summary is not None else {})}
            for name, kind, summary in entities
        ],
        "relations": [{"source": s, "target": t, "relation_type": r} for s, r, t in relations],
    }


def work_story() -> SessionLog:
    log = SessionLog("s1")
    log.add("session.started", {"agent": "claude-code", "goal": "Make the ledger durable"})
    log.add("goal.created", {"goal_id": "goal-1", "title": "Never lose an acknowledged event"})
    log.add("task.proposed", {"task_id": "task-17", "title": "Repair torn lines", "goal_id": "goal-1"})
    log.add("task.claimed", {"task_id": "task-17", "assignee": "claude-code"})
    log.add("decision.made", {"decision_id": "dec-9", "title": "Truncate and re-fetch", "task_id": "task-17"})
    log.add("command.completed", {"command": "pytest -q", "exit_code": 1, "taskId": "task-17"})
    log.add(
        "file.edit.applied",
        {
            "path": "eventloom/ledger/mirror.py",
            "line_start": 88,
            "line_end": 93,
            "checksum": "sha256:abc",
            "task_id": "task-17",
        },
    )
    log.add("command.completed", {"command": "pytest -q", "exit_code": 0})
    log.add("task.completed", {"task_id": "task-17", "summary": "Torn tails repaired"})
    return log
