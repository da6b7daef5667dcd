"""What only the Neo4j backend has: its schema migrations, its bulk loader, and rebuilding it in place
from the stream or from a verified ledger. The shared behaviour is in the contract suite."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nats.errors
import pytest

from eventloom.errors import EventloomError, ReadModelUnavailableError
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from projectors.graph.rebuild_neo4j import rebuild_neo4j_from_ledger, rebuild_neo4j_from_stream
from projectors.graph.registry import extract
from readmodels.documents import MemoryDoc
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.protocol import GraphModelOutdatedError, GraphStoreError, MigrationChecksumError
from readmodels.neo4j import graph_store as neo4j_module
from readmodels.neo4j.bulk import Neo4jBulkLoader
from readmodels.neo4j.graph_store import Neo4jGraphStore
from readmodels.neo4j.schema import schema_plan
from readmodels.query.cypher_service import ask_cypher
from readmodels.retrieval.invalidated import no_longer_holding
from readmodels.retrieval.lanes import Candidate
from readmodels.retrieval.work import work_state
from tests.conftest import run_cli
from tests.retrieval_support import flag_story, work_story_with_owners
from tests.test_graph_rebuild import story
from tests.test_graph_support import SessionLog, dump, fact, project, work_story
from tests.test_ledger import caught_up, running_mirror

if TYPE_CHECKING:
    from readmodels.neo4j.local import LocalNeo4j, Neo4jEndpoint

pytestmark = pytest.mark.anyio


def open_store(endpoint: Neo4jEndpoint, vector_dimensions: int = 384) -> Neo4jGraphStore:
    return Neo4jGraphStore(
        endpoint.uri, user=endpoint.user, password=endpoint.password, vector_dimensions=vector_dimensions
    )


def changing_story() -> SessionLog:
    """Versions superseded and invalidated, edges across versions, inferred and retracted, sources cited."""
    log = SessionLog("c1")
    log.add(
        "memory.fact.asserted", fact(("auth", "service", "v1"), relations=[("auth", "owned_by", "team-a")])
    )
    log.add("memory.fact.asserted", fact(("auth", "service", "v2")))
    log.add(
        "inference.edge.generated",
        {"edge_id": "e1", "source": "auth", "target": "tokens", "relation_type": "depends_on",
         "confidence": 0.7, "method": "m"},
    )  # fmt: skip
    log.add("inference.edge.retracted", {"edge_id": "e1", "reason": "no"})
    log.add(
        "document.indexed",
        {"path": "docs/auth.md", "title": "Auth", "checksum": "sha256:1",
         "chunks": [{"text": "Tokens refresh early.", "line_start": 3, "line_end": 3}]},
    )  # fmt: skip
    log.add("memory.invalidated", {"entity": {"name": "auth", "entity_type": "service"}})
    return log


@pytest.fixture
async def neo4j_store(neo4j_endpoint: Neo4jEndpoint) -> AsyncIterator[Neo4jGraphStore]:
    async with open_store(neo4j_endpoint) as store:
        await store.clear()
        yield store


@pytest.fixture
def neo4j_settings(settings: Settings, neo4j_endpoint: Neo4jEndpoint) -> Settings:
    return dataclasses.replace(
        settings,
        graph_backend="neo4j",
        embedder="hash",  # the shared test server's vector indexes are 384 wide, as `hash`'s vectors
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )


async def test_migrations_are_recorded_and_the_schema_exists(neo4j_store: Neo4jGraphStore) -> None:
    plan = schema_plan()
    recorded = await neo4j_store.run_write(  # the graph's own: plug-ins' read models record theirs too
        "MATCH (m:Migration) WHERE m.name IN $names RETURN m.name AS name, m.checksum AS checksum, "
        "m.statements AS statements, m.applied_at AS applied_at ORDER BY name",
        {"names": [m.name for m in plan]},
    )
    assert [(r["name"], r["checksum"], r["statements"]) for r in recorded] == [
        (m.name, m.checksum, m.statement_count) for m in plan
    ]
    assert all(r["applied_at"].endswith("Z") for r in recorded)
    constraints = {r["name"] for r in await neo4j_store.run_write("SHOW CONSTRAINTS YIELD name", {})}
    assert {"session_id", "event_uid", "entity_uid", "entity_version", "checkpoint_id"} <= constraints
    indexes = {
        r["name"]: r for r in await neo4j_store.run_write("SHOW INDEXES YIELD name, type, state, options", {})
    }
    assert indexes["entity_text"]["type"] == "FULLTEXT"
    assert indexes["entity_embedding"]["type"] == "VECTOR"
    assert indexes["entity_embedding"]["options"]["indexConfig"]["vector.dimensions"] == 384
    assert indexes["relates_uid"]["type"] == "RANGE"
    assert all(index["state"] == "ONLINE" for index in indexes.values())


async def test_reopening_applies_nothing_and_an_edited_migration_is_refused(
    neo4j_store: Neo4jGraphStore, neo4j_endpoint: Neo4jEndpoint
) -> None:
    async with open_store(neo4j_endpoint) as again:
        assert again.migrations_applied == []
    with pytest.raises(MigrationChecksumError, match="0004_entity_vector"):
        async with open_store(neo4j_endpoint, vector_dimensions=768):  # the same migration, edited
            pass
    await neo4j_store.run_write("MATCH (m:Migration {name: '0002_lookup_indexes'}) SET m.checksum = 'x'", {})
    try:
        with pytest.raises(MigrationChecksumError, match="0002_lookup_indexes"):
            async with open_store(neo4j_endpoint):
                pass
    finally:
        plan = {m.name: m.checksum for m in schema_plan()}
        await neo4j_store.run_write(
            "MATCH (m:Migration {name: '0002_lookup_indexes'}) SET m.checksum = $c",
            {"c": plan["0002_lookup_indexes"]},
        )


async def test_bulk_loaded_graph_equals_the_incremental_one(
    neo4j_store: Neo4jGraphStore, neo4j_endpoint: Neo4jEndpoint
) -> None:
    events = work_story().events + changing_story().events
    await project(neo4j_store, events, batch=3)
    incremental = {session: await dump(neo4j_store, session) for session in ("s1", "c1")}
    await neo4j_store.run_write("CREATE (:PluginModel {key: 'kept'})", {})  # a plug-in's read model
    await neo4j_store.clear()
    kept = await neo4j_store.run_write("MATCH (n:PluginModel) RETURN count(n) AS n", {})
    assert kept == [{"n": 1}]  # clearing the graph leaves other read models alone ...
    loader = Neo4jBulkLoader(open_store(neo4j_endpoint), workers=2)  # ... and they do not block a load
    await loader.open()
    for start in range(0, len(events), 4):
        await loader.apply("graph", [extract(event) for event in events[start : start + 4]])
    await loader.close()
    assert {session: await dump(neo4j_store, session) for session in ("s1", "c1")} == incremental
    assert await neo4j_store.applied_seqs("graph", ["s1", "c1"]) == {"s1": 9, "c1": 6}
    indexes = await neo4j_store.run_auto_commit("SHOW INDEXES YIELD name, state RETURN name, state")
    assert {"entity_text", "relates_uid", "entity_version"} <= {row["name"] for row in indexes}
    assert {row["state"] for row in indexes} == {"ONLINE"}  # the indexes the load deferred, built again
    await neo4j_store.run_write("MATCH (n:PluginModel) DELETE n", {})
    migrations = await neo4j_store.run_write("MATCH (m:Migration) RETURN m.name AS name", {})
    assert {m.name for m in schema_plan()} <= {row["name"] for row in migrations}
    refused = Neo4jBulkLoader(open_store(neo4j_endpoint), workers=1)
    with pytest.raises(GraphStoreError, match="already holds a graph"):
        await refused.open()


async def test_rebuild_from_the_stream_and_from_the_ledger(
    log: EventLog, neo4j_settings: Settings, neo4j_store: Neo4jGraphStore
) -> None:
    await log.append_many(story("a") + story("b"))
    async with running_mirror(log):
        await caught_up(log)
    async with await EventLog.open(neo4j_settings) as neo4j_log:
        seen: dict[str, tuple[int, int]] = {}
        report = await rebuild_neo4j_from_stream(
            neo4j_log, progress=lambda phase, done, total: seen.update({phase: (done, total)})
        )
    assert report.events == 14 and report.source == "stream" and seen["replay"] == (14, 14)
    assert seen["load"][0] == seen["load"][1] > 14  # rows: nodes and relationships
    from_stream = {s: await dump(neo4j_store, s) for s in ("a", "b")}
    assert from_stream["a"]["events"][-1]["seq"] == 7
    assert await neo4j_store.applied_seqs("graph", ["a", "b"]) == {"a": 7, "b": 7}

    keyring = KeyStore(log.settings.data_dir).load_keyring()
    report = await rebuild_neo4j_from_ledger(neo4j_settings, log.settings.ledger_dir, keyring)
    assert report.events == 14 and report.source.startswith("ledger:")
    assert {s: await dump(neo4j_store, s) for s in ("a", "b")} == from_stream


async def test_a_ledger_that_does_not_verify_deletes_nothing(
    log: EventLog, neo4j_settings: Settings, neo4j_store: Neo4jGraphStore
) -> None:
    await log.append_many(story("a"))
    async with running_mirror(log):
        await caught_up(log)
    async with await EventLog.open(neo4j_settings) as neo4j_log:
        await rebuild_neo4j_from_stream(neo4j_log)
    before = await dump(neo4j_store, "a")
    ledger = log.settings.ledger_dir / "a.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    assert b"Refresh early" in lines[2]  # the decision, third event
    lines[2] = lines[2].replace(b"Refresh early", b"Refresh late!")
    await asyncio.to_thread(ledger.write_bytes, b"".join(lines))
    keyring = KeyStore(log.settings.data_dir).load_keyring()
    with pytest.raises(EventloomError, match="does not verify"):
        await rebuild_neo4j_from_ledger(neo4j_settings, log.settings.ledger_dir, keyring)
    assert await dump(neo4j_store, "a") == before


def test_schema_plan_needs_a_sane_vector_width() -> None:
    for bad in (0, -1, 5000):
        with pytest.raises(ValueError, match="vector_dimensions"):
            schema_plan(bad)
    (vectors,) = [
        migration for migration in schema_plan(1536) if migration.name == "0007_vector_doc_embedding"
    ]
    assert "`vector.dimensions`: 1536" in vectors.statements[0]


async def test_an_unreachable_server_is_unavailable_not_broken() -> None:
    store = Neo4jGraphStore("bolt://127.0.0.1:9", password="x", connection_timeout_s=1, retry_time_s=1)
    with pytest.raises(ReadModelUnavailableError, match="unavailable"):
        await store.open()


@pytest.mark.slow
async def test_a_batch_cut_off_by_a_connection_reset_is_retried_and_applied_once(
    neo4j_restartable: LocalNeo4j, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neo4j dies in the middle of a batch's transaction and comes back: the driver retries the whole
    transaction with backoff, the caller never sees an error, and the batch is applied once."""
    endpoint = neo4j_restartable.endpoint
    store = Neo4jGraphStore(endpoint.uri, user=endpoint.user, password=endpoint.password, retry_time_s=120)
    log = work_story()
    attempts = 0
    mid_batch = asyncio.Event()
    real_step = neo4j_module._run_step

    async def step(tx: Any, write: Any) -> None:
        nonlocal attempts
        if write.statement.startswith("MERGE (s:Session"):
            attempts += 1
            if attempts == 1:
                mid_batch.set()
                await asyncio.sleep(3)  # Neo4j is killed meanwhile: this transaction is cut off
        await real_step(tx, write)

    async with store:
        await project(store, log.events[:4])
        monkeypatch.setattr(neo4j_module, "_run_step", step)
        batch = asyncio.create_task(store.apply("graph", [extract(e) for e in log.events[4:]]))
        await asyncio.wait_for(mid_batch.wait(), 30)
        await asyncio.to_thread(neo4j_restartable.kill)
        await asyncio.sleep(4)  # the retries fail while it is down
        await asyncio.to_thread(neo4j_restartable.start)
        assert await asyncio.wait_for(batch, 120) == len(log.events) - 4
        assert attempts >= 2
        monkeypatch.undo()
        applied = await dump(store, "s1")
        await store.clear()
        await project(store, log.events)
        assert applied == await dump(store, "s1")


async def test_the_cli_applies_the_schema_and_rebuilds_from_the_stream_and_the_ledger(
    log: EventLog,
    neo4j_store: Neo4jGraphStore,
    neo4j_endpoint: Neo4jEndpoint,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await log.append_many(story("a"))
    async with running_mirror(log):
        await caught_up(log)
    for name, value in neo4j_endpoint.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EVENTLOOM_EMBEDDER", "hash")  # the shared test server's vector indexes: 384 wide
    applied = await asyncio.to_thread(run_cli, log.settings, "schema-apply", "--backend", "neo4j", "--json")
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout) == {"backend": "neo4j", "applied": []}  # opening the store did it
    for source in ([], ["--from-ledger", str(log.settings.ledger_dir)]):
        done = await asyncio.to_thread(
            run_cli, log.settings, "rebuild", "graph", "--backend", "neo4j", "--json", *source
        )
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["events"] == 7 and report["source"] == ("ledger:" if source else "stream") + (
            str(log.settings.ledger_dir) if source else ""
        )
        assert [event.seq for event in await neo4j_store.events("a")] == list(range(1, 8))
    monkeypatch.delenv("NEO4J_URI")
    refused = await asyncio.to_thread(run_cli, log.settings, "rebuild", "graph", "--backend", "neo4j")
    assert refused.returncode == 2 and "NEO4J_URI" in refused.stderr


@pytest.mark.slow
async def test_a_node_with_the_neo4j_backend_projects_into_neo4j_and_answers_graph_queries(
    tmp_path: Path, neo4j_endpoint: Neo4jEndpoint, neo4j_store: Neo4jGraphStore
) -> None:
    settings = Settings(
        data_dir=tmp_path / "node",
        producers="none",
        graph_backend="neo4j",
        embedder="hash",  # the shared test server's vector indexes are 384 wide, as `hash`'s vectors
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )
    node = NodeProcess(settings)
    info = await asyncio.to_thread(node.start)
    try:
        async with await EventLog.open(dataclasses.replace(settings, nats_url=info.nats_url)) as log:
            await log.append_many(story("n"))
            count = "MATCH (e:Event) WHERE e.session = 'n' RETURN count(e) AS n"
            for _ in range(300):
                with contextlib.suppress(nats.errors.NoRespondersError):
                    if (await ask_cypher(log.client, count))[0]["n"] == 7:
                        break
                await asyncio.sleep(0.1)
            assert (await ask_cypher(log.client, count))[0]["n"] == 7  # answered by the node, from Neo4j
        assert [event.seq for event in await neo4j_store.events("n")] == list(range(1, 8))
        assert await neo4j_store.applied_seqs("graph", ["n"]) == {"n": 7}
    finally:
        await asyncio.to_thread(node.stop)


async def test_work_state_and_invalidation_reads_agree_with_ladybug(
    neo4j_store: Neo4jGraphStore, tmp_path: Path
) -> None:
    """The reads behind issue 17's defects 3 and 4 (`readmodels.retrieval.work`, `.invalidated`) give the
    same answers on both backends."""
    events = [*work_story_with_owners().events, *flag_story().events]
    answers = []
    async with LadybugGraphStore(tmp_path / "graph.lbug") as ladybug:
        for store in (ladybug, neo4j_store):
            await project(store, events)
            work = await work_state(store, [], session="w", as_of=None, asks_about_work=True)
            flag_event = next(e for e in events if e.session == "s" and e.seq == 1)
            doc = MemoryDoc(
                session="s", seq=1, event_hash=flag_event.hash, event_type=flag_event.type,
                ts=flag_event.ts, kind="event", text="Feature flag X",
            )  # fmt: skip
            found = [Candidate(key="event:s/1", score=1.0, doc=doc)]
            gone = await no_longer_holding(store, found, set(), None, {"event:s/1"})
            answers.append((sorted((t.task, t.status, t.assignee, tuple(t.blocked_by)) for t in work), gone))
    ladybug_answer, neo4j_answer = answers
    assert ladybug_answer == neo4j_answer
    assert ladybug_answer[0] == [("T1", "open", None, ()), ("T2", "claimed", "bob", ("T1",))]
    assert ladybug_answer[1].candidates == {"event:s/1"}
    assert [g.entity for g in ladybug_answer[1].invalidations] == ["flag-x"]


async def test_a_graph_whose_relations_join_versions_is_refused_on_its_first_write_until_cleared(
    neo4j_store: Neo4jGraphStore,
) -> None:
    """Neo4j refuses at the first write, not at open: the in-place rebuild must still open and clear it."""
    await neo4j_store.run_write("CREATE (:Entity {uid: 'a'})-[:RELATES {uid: 'r'}]->(:Entity {uid: 'b'})", {})
    projections = [extract(event) for event in work_story().events]
    with pytest.raises(GraphModelOutdatedError, match="eventloom rebuild graph"):
        await neo4j_store.apply("graph", projections)
    assert await neo4j_store.applied_seqs("graph", ["s1"]) == {}  # nothing written
    await neo4j_store.clear()
    assert await neo4j_store.apply("graph", projections) == len(projections)
