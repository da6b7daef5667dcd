"""Bulk loading (`eventloom rebuild graph`): the same graph as incremental projection, row for row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ladybug
import msgspec
import pytest

from eventloom.errors import ReadModelBrokenError
from projectors.graph.registry import extract
from readmodels.embedded.graph_bulk import LadybugBulkLoader
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.embedded.ladybug_io import run_rows
from readmodels.graph.bulk.tables import (
    CHECKPOINT,
    ENTITY,
    ENTITY_CITES,
    ENTITY_KEY,
    EVENT,
    EVENT_CITES,
    HAS_EVENT,
    NEXT_EVENT,
    OBSERVATIONS,
    PREVIOUS_EVENT,
    PREVIOUS_VERSION,
    PROJECTED_ENTITY,
    PROJECTED_RELATION,
    RELATES,
    SESSION,
    SOURCE,
    SUPERSEDED_BY,
    CopyTarget,
    copy_order,
    typed_relation,
)
from readmodels.graph.identity import typed_label
from readmodels.graph.protocol import GraphStoreError
from tests.test_graph_support import SessionLog, fact, project, work_story

pytestmark = pytest.mark.anyio


def full_story() -> SessionLog:
    """Every kind of write: spine, versions under standing edges, invalidations, inferences, retractions,
    causal edges, sources cited by events and entities, task observations."""
    log = work_story()
    log.add(
        "memory.fact.asserted",
        fact(("api", "service", "v1"), ("db", "database", "pg"), relations=[("api", "depends_on", "db")]),
    )
    log.add("memory.fact.asserted", fact(("api", "service", "v2"), relations=[("api", "owned_by", "team-a")]))
    log.add("memory.fact.asserted", fact(("db", "database", "pg 17")))
    log.add("memory.invalidated", {"name": "db", "entity_type": "database", "reason": "migrated"})
    log.add("memory.fact.asserted", fact(("db", "database", "pg 18")))
    inferred = {"source": "task-17", "target": "dec-9", "relation_type": "likely_implemented_decision"}
    log.add("inference.edge.generated", {**inferred, "confidence": 0.86, "method": "m", "edge_id": "e1"})
    log.add(
        "inference.edge.generated",
        {"source": "api", "target": "db", "relation_type": "uses", "confidence": 0.5, "method": "m"},
    )
    log.add("inference.edge.retracted", {"edge_id": "e1", "reason": "no"})
    log.add(
        "causal.edge.generated",
        {
            "cause": "edit mirror.py",
            "effect": "crash test passes",
            "taxonomy": "fixed",
            "relation_type": "causal_fixed",
            "confidence": 0.81,
            "method": "command_failure_then_fix",
            "evidence": [{"event_seq": 1}],
        },
    )
    log.add(
        "document.indexed",
        {
            "path": "docs/operations.md",
            "title": "Operations",
            "checksum": "sha256:2e7d",
            "content": "# Operations\n\nBack up daily.\n",
            "chunks": [{"text": "# Operations", "line_start": 1, "line_end": 1}],
        },
    )
    log.add("tool.call.completed", {"tool": "Edit", "ok": True, "taskId": "task-17"})
    log.add("hook.checkpoint", {"name": "before-stop", "state": {"turn": 3}, "task_id": "task-17"})
    log.add("memory.fact.asserted", fact(("api", "service", "v3")))
    log.add("mystery.event", {"anything": [1, 2]})
    return log


def graph_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table but `Migration` (rels with their endpoints' keys), sorted: the whole graph."""
    db = ladybug.Database(str(path), read_only=True)
    connection = ladybug.Connection(db)
    try:
        tables = run_rows(connection, "CALL show_tables() RETURN name, type", None)
        dump: dict[str, list[tuple[Any, ...]]] = {}
        for table in tables:
            name = str(table["name"])
            if name == "Migration":
                continue
            info = run_rows(connection, f"CALL table_info('{name}') RETURN *", None)
            props = "".join(f", x.`{row['name']}` AS c{i}" for i, row in enumerate(info))
            if table["type"] == "NODE":
                rows = run_rows(connection, f"MATCH (x:`{name}`) RETURN 0 AS node{props}", None)
            else:
                pairs = run_rows(connection, f"CALL show_connection('{name}') RETURN *", None)
                rows = []
                for pair in pairs:
                    a, b = pair["source table primary key"], pair["destination table primary key"]
                    source, target = pair["source table name"], pair["destination table name"]
                    ends = f"(a:`{source}`)-[x:`{name}`]->(b:`{target}`)"
                    rows += run_rows(
                        connection,
                        f"MATCH {ends} RETURN a.`{a}` AS source, b.`{b}` AS target{props}",
                        None,
                    )
            dump[name] = sorted(tuple(map(repr, row.values())) for row in rows)
        return dump
    finally:
        connection.close()
        db.close()


async def incremental(path: Path, log: SessionLog, batch: int) -> None:
    store = LadybugGraphStore(path)
    async with store:
        await project(store, log.events, batch=batch)


async def bulk_loaded(path: Path, log: SessionLog, batch: int, spill_every_rows: int, workers: int) -> None:
    loader = LadybugBulkLoader(path, spill_every_rows=spill_every_rows, workers=workers)
    await loader.open()
    try:
        for start in range(0, len(log.events), batch):
            await loader.apply("graph", [extract(e) for e in log.events[start : start + batch]])
    finally:
        await loader.close()


@pytest.mark.parametrize(
    ("batch", "spill_every_rows", "workers"), [(1, 1, 1), (3, 7, 2), (1000, 1_000_000, 3)]
)
async def test_a_bulk_load_equals_incremental_projection_row_for_row(
    tmp_path: Path, batch: int, spill_every_rows: int, workers: int
) -> None:
    log = full_story()
    for session in ("s2", "s3"):  # sessions spread over the workers
        other = SessionLog(session)
        for event in log.events[:12]:
            other.add(event.type, event.payload)
        log.events.extend(other.events)
    await incremental(tmp_path / "inc" / "graph.lbug", log, batch=1)
    await bulk_loaded(tmp_path / "bulk" / "graph.lbug", log, batch, spill_every_rows, workers)
    expected = graph_rows(tmp_path / "inc" / "graph.lbug")
    assert len(expected) > 20 and all(
        expected[name] for name in ("RELATES", "CITES_SOURCE", "OBSERVED_TOOL_CALL")
    )
    assert graph_rows(tmp_path / "bulk" / "graph.lbug") == expected
    assert not (tmp_path / "bulk" / "graph.lbug.spill").exists()


async def test_incremental_projection_goes_on_from_a_bulk_loaded_graph(tmp_path: Path) -> None:
    log = full_story()
    head, tail = log.events[:20], log.events[20:]
    loader = LadybugBulkLoader(tmp_path / "bulk" / "graph.lbug")
    await loader.open()
    await loader.apply("graph", [extract(e) for e in head])
    assert await loader.applied_seqs("graph", ["s1", "s2"]) == {"s1": 20}
    await loader.close()
    async with LadybugGraphStore(tmp_path / "bulk" / "graph.lbug") as store:
        assert await store.applied_seqs("graph", ["s1"]) == {"s1": 20}
        assert await project(store, log.events) == len(tail)  # the head is skipped by its checkpoint
    await incremental(tmp_path / "inc" / "graph.lbug", log, batch=5)
    assert graph_rows(tmp_path / "bulk" / "graph.lbug") == graph_rows(tmp_path / "inc" / "graph.lbug")


async def test_a_bulk_load_skips_what_it_already_has_and_refuses_a_second_projector(tmp_path: Path) -> None:
    log = work_story()
    loader = LadybugBulkLoader(tmp_path / "graph.lbug")
    await loader.open()
    try:
        batch = [extract(e) for e in log.events]
        assert await loader.apply("graph", batch) == len(batch)
        assert await loader.apply("graph", batch[2:]) == 0
        with pytest.raises(GraphStoreError, match="projector 'graph'"):
            await loader.apply("other", batch)
    finally:
        await loader.close()
    assert len(graph_rows(tmp_path / "graph.lbug")["Event"]) == len(log.events)


async def test_a_bulk_load_refuses_a_database_that_holds_a_graph(tmp_path: Path) -> None:
    await incremental(tmp_path / "graph.lbug", work_story(), batch=100)
    loader = LadybugBulkLoader(tmp_path / "graph.lbug")
    with pytest.raises(GraphStoreError, match="already holds a graph"):
        await loader.open()
    await loader.close()


async def test_a_worker_that_dies_fails_the_load_and_nothing_is_loaded(tmp_path: Path) -> None:
    log = work_story()
    loader = LadybugBulkLoader(tmp_path / "graph.lbug", workers=2)
    await loader.open()
    assert await loader.apply("graph", [extract(e) for e in log.events[:3]]) == 3
    for worker in loader._workers:
        worker.kill()  # as the kernel's OOM killer would
        worker.wait()
    with pytest.raises(ReadModelBrokenError, match="gone"):  # on the call after the send that hit it
        for _ in range(3):
            await loader.apply("graph", [extract(e) for e in log.events[3:]])
    with pytest.raises(ReadModelBrokenError, match="failed earlier"):
        await loader.applied_seqs("graph", ["s1"])
    with pytest.raises(ReadModelBrokenError, match="gone"):
        await loader.close()
    assert graph_rows(tmp_path / "graph.lbug").get("Event") == []
    assert not (tmp_path / "graph.lbug.spill").exists()


def all_targets() -> list[CopyTarget]:
    return [
        SESSION,
        EVENT,
        ENTITY,
        ENTITY_KEY,
        SOURCE,
        CHECKPOINT,
        HAS_EVENT,
        NEXT_EVENT,
        PREVIOUS_EVENT,
        SUPERSEDED_BY,
        PREVIOUS_VERSION,
        RELATES,
        PROJECTED_ENTITY,
        PROJECTED_RELATION,
        EVENT_CITES,
        ENTITY_CITES,
        *OBSERVATIONS.values(),
        typed_relation(typed_label("depends_on")),
    ]


async def test_copy_layouts_match_the_tables_column_for_column(tmp_path: Path) -> None:
    """`COPY` maps columns by position: each layout must list the table's properties in its order."""
    await incremental(tmp_path / "graph.lbug", full_story(), batch=100)
    db = ladybug.Database(str(tmp_path / "graph.lbug"), read_only=True)
    connection = ladybug.Connection(db)
    try:
        for target in all_targets():
            info = run_rows(connection, f"CALL table_info('{target.table}') RETURN *", None)
            declared = [(str(row["name"]), str(row["type"]).replace("BOOL", "BOOLEAN")) for row in info]
            layout = list(target.columns) if target.node else list(target.columns[2:])
            assert layout == declared, target.table
    finally:
        connection.close()
        db.close()


def test_checkpoints_sort_last_also_as_decoded_from_a_worker() -> None:
    decoded = msgspec.msgpack.decode(
        msgspec.msgpack.encode([CHECKPOINT, EVENT, RELATES]), type=list[CopyTarget]
    )
    assert decoded[0] is not CHECKPOINT
    assert [target.table for target in sorted(decoded, key=copy_order)] == ["Event", "RELATES", "Checkpoint"]
