"""LadybugDB schema: a side-effect-free plan, idempotent migrations with checksums, changed ones refused."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import ladybug
import pytest

from projectors.graph.registry import extract
from readmodels.embedded.graph_schema import apply_migrations, schema_plan, typed_rel_ddl
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.cypher.io import Execute
from readmodels.graph.identity import typed_label
from readmodels.graph.migrations import EDGES_JOIN_ENTITIES
from readmodels.graph.protocol import (
    GraphModelOutdatedError,
    GraphStore,
    MigrationChecksumError,
    PlannedMigration,
)
from tests import test_graph_support as support
from tests.test_graph_support import work_story

backend = support.backend  # the doc's queries run on every backend
fresh_store = support.fresh_store
graph_store = support.graph_store

pytestmark = pytest.mark.anyio


def test_the_plan_is_pure_and_stable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    first, second = schema_plan(), schema_plan()
    assert first == second
    assert list(tmp_path.iterdir()) == []  # nothing was created
    names = [m.name for m in first]
    assert names == sorted(names) and len(set(names)) == len(names)
    for migration in first:
        assert (
            migration.checksum
            == "sha256:" + hashlib.sha256("\n".join(migration.statements).encode()).hexdigest()
        )
        assert migration.statement_count == len(migration.statements) > 0
        assert all(re.search(r"IF (NOT )?EXISTS", statement) for statement in migration.statements)
    tables = " ".join(s for m in first for s in m.statements)
    for table in (
        "Session",
        "Event",
        "Entity",
        "EntityKey",
        "Source",
        "Checkpoint",
        "Migration",
        "HAS_EVENT",
        "NEXT_EVENT",
        "PREVIOUS_EVENT",
        "SUPERSEDED_BY",
        "PREVIOUS_VERSION",
        "RELATES",
        "PROJECTED_ENTITY",
        "PROJECTED_RELATION",
        "CITES_SOURCE",
        "OBSERVED_COMMAND",
        "OBSERVED_FILE_EDIT",
        "OBSERVED_TOOL_CALL",
        "HAS_CHECKPOINT",
    ):
        assert f"EXISTS {table}(" in tables


async def test_migrations_are_recorded_with_checksums_and_applied_once(tmp_path: Path) -> None:
    store = LadybugGraphStore(tmp_path / "g.lbug")
    await store.open()
    rows = await store.query(
        "MATCH (m:Migration) RETURN m.name AS name, m.checksum AS checksum, m.statements AS n, "
        "m.applied_at AS at ORDER BY name"
    )
    await store.close()
    plan = schema_plan()
    assert [(r["name"], r["checksum"], r["n"]) for r in rows] == [
        (m.name, m.checksum, m.statement_count) for m in plan
    ]
    assert all(r["at"].endswith("Z") for r in rows)

    reopened = LadybugGraphStore(tmp_path / "g.lbug")
    await reopened.open()
    again = await reopened.query(
        "MATCH (m:Migration) RETURN m.name AS name, m.checksum AS checksum, "
        "m.statements AS n, m.applied_at AS at ORDER BY name"
    )
    await reopened.close()
    assert again == rows  # nothing re-applied, not even re-recorded


def _raw(path: Path) -> tuple[ladybug.Database, ladybug.Connection]:
    db = ladybug.Database(str(path))
    return db, ladybug.Connection(db)


def _execute(conn: ladybug.Connection) -> Execute:
    def execute(cypher: str, params: dict[str, Any] | None) -> list[dict[str, Any]]:
        result = conn.execute(cypher, params or {})
        assert not isinstance(result, list)
        names = result.get_column_names()
        rows: list[dict[str, Any]] = []
        while result.has_next():
            row = result.get_next()
            rows.append(row if isinstance(row, dict) else dict(zip(names, row, strict=True)))
        return rows

    return execute


def test_apply_is_idempotent_and_a_changed_checksum_is_refused(tmp_path: Path) -> None:
    db, conn = _raw(tmp_path / "g.lbug")
    try:
        execute = _execute(conn)
        assert apply_migrations(execute) == [m.name for m in schema_plan()]
        assert apply_migrations(execute) == []
        edited = [*schema_plan()]
        changed = edited[2]
        edited[2] = PlannedMigration(
            name=changed.name,
            checksum="sha256:" + "0" * 64,
            statements=(
                *changed.statements,
                "CREATE NODE TABLE IF NOT EXISTS Sneaky(id STRING, PRIMARY KEY(id))",
            ),
        )
        extra = PlannedMigration(
            name="9999_later",
            checksum="sha256:1",
            statements=("CREATE NODE TABLE IF NOT EXISTS Later(id STRING, PRIMARY KEY(id))",),
        )
        with pytest.raises(MigrationChecksumError, match=changed.name):
            apply_migrations(execute, [*edited, extra])
        tables = {row["name"] for row in execute("CALL show_tables() RETURN name", None)}
        assert not {"Sneaky", "Later"} & tables  # refused before anything was applied
        assert apply_migrations(execute, [*schema_plan(), extra]) == ["9999_later"]
    finally:
        conn.close()
        db.close()


async def test_a_graph_whose_relations_join_versions_must_be_rebuilt_and_one_without_is_upgraded(
    tmp_path: Path,
) -> None:
    """Before `0005_edges_join_entities`, relations joined entity versions: such a graph cannot be
    converted in place (its copies per version are not the new edges), so opening it says to rebuild."""
    before = [m for m in schema_plan() if m.name < EDGES_JOIN_ENTITIES]
    for name, with_edge in (("old", True), ("empty", False)):
        db, conn = _raw(tmp_path / f"{name}.lbug")
        execute = _execute(conn)
        apply_migrations(execute, before)
        if with_edge:
            execute("CREATE (:Entity {uid: 'a'}), (:Entity {uid: 'b'})", None)
            execute(
                "MATCH (a:Entity {uid: 'a'}), (b:Entity {uid: 'b'}) CREATE (a)-[:RELATES {uid: 'r'}]->(b)",
                None,
            )
        conn.close()
        db.close()
    with pytest.raises(GraphModelOutdatedError, match="eventloom rebuild graph"):
        await LadybugGraphStore(tmp_path / "old.lbug").open()
    async with LadybugGraphStore(tmp_path / "empty.lbug") as store:
        await store.apply("graph", [extract(event) for event in work_story().events])
        assert await support.count(store, "(a:EntityKey)-[r:RELATES]->(b:EntityKey)") > 0


async def test_the_store_refuses_to_open_a_database_with_a_tampered_migration(tmp_path: Path) -> None:
    store = LadybugGraphStore(tmp_path / "g.lbug")
    await store.open()
    await store.close()
    db, conn = _raw(tmp_path / "g.lbug")
    conn.execute("MATCH (m:Migration {name: '0003_relations'}) SET m.checksum = 'sha256:edited'")
    conn.close()
    db.close()
    with pytest.raises(MigrationChecksumError, match="0003_relations"):
        await LadybugGraphStore(tmp_path / "g.lbug").open()


def test_typed_relationship_ddl_only_takes_validated_labels() -> None:
    assert typed_rel_ddl(typed_label("depends_on")).startswith(
        "CREATE REL TABLE IF NOT EXISTS `DEPENDS_ON`(FROM EntityKey TO EntityKey, uid STRING"
    )
    assert typed_label("relates") == "REL_RELATES"
    assert typed_label("rel_x") == "REL_REL_X"


DOC = Path(__file__).resolve().parents[1] / "docs" / "graph-schema.md"
DOC_QUERIES = re.findall(r"^```cypher\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
DOC_NEO4J_QUERIES = re.findall(
    r"^```cypher-neo4j\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL
)
DOC_PARAMS: dict[str, Any] = {
    "text": "torn",
    "session": "s1",
    "name": "task-17",
    "entity_type": "task",
    "task_id": "task-17",
    "as_of": "2025-05-01T09:00:04.500000Z",
    "seq": 9,
}


async def test_every_inspection_query_in_the_docs_runs(graph_store: GraphStore, backend: str) -> None:
    assert len(DOC_QUERIES) >= 8
    log = work_story()
    log.add(
        "inference.edge.generated",
        {"source": "task-17", "target": "dec-9", "relation_type": "likely_implemented_decision",
         "confidence": 0.86, "method": "task_completed_decision_citation_v1"},
    )  # fmt: skip
    await graph_store.apply("graph", [extract(event) for event in log.events])
    results = []
    for query in DOC_QUERIES:
        params = {name: DOC_PARAMS[name] for name in re.findall(r"\$(\w+)", query)}
        # the one difference the doc names
        statement = query.replace("label(o)", "type(o)") if backend == "neo4j" else query
        results.append(await graph_store.query(statement, params))
    assert all(results[i] for i in (0, 1, 2, 3, 4, 5, 6, 8, 9))  # each shows something on this story
    assert results[7] == []  # the hash chain is intact
    if backend == "neo4j":
        assert len(DOC_NEO4J_QUERIES) == 2
        found, indexes = [await graph_store.query(query, {"text": "torn"}) for query in DOC_NEO4J_QUERIES]
        assert found[0]["name"] == "task-17"  # "Repair torn lines"
        assert {"entity_text", "entity_embedding"} <= {row["name"] for row in indexes}
