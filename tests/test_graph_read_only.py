"""Operator Cypher is read-only on both backends: no write, no file, no network, no extension, no way round.

Each refused statement is checked three ways: it raises `ReadOnlyQueryError`, the graph is unchanged, and
no file outside the graph was read (a secret's text never comes back) or written.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.cypher.read_plan import refuse_ladybug_plan, refuse_neo4j_plan
from readmodels.graph.protocol import GraphQueryError, GraphStore, ReadOnlyQueryError
from readmodels.neo4j.graph_store import Neo4jGraphStore
from readmodels.neo4j.local import Neo4jEndpoint
from tests import test_graph_support as support
from tests.test_graph_support import dump, project, work_story

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store
SECRET = "the-private-key-material-7f3a"

BOTH = [
    "CREATE (e:Entity {uid: 'x'})",
    "create (e:Entity {uid: 'x'})",
    "MATCH (e:Entity) SET e.name = 'x'",
    "MATCH (e:Entity) DETACH DELETE e",
    "MERGE (e:Entity {uid: 'x'}) RETURN e",
    "/* a comment */ CREATE (e:Entity {uid: 'x'})",
    "// line comment\nCREATE (e:Entity {uid: 'x'})",
    "\u00a0\u2003CREATE (e:Entity {uid: 'x'})",  # Unicode spaces before a write
    "MATCH (e:Entity) RETURN e.name; CREATE (x:Entity {uid: 'y'})",
    "MATCH (e:Entity) RETURN e.name /* ; */ ; CREATE (x:Entity {uid: 'y'})",
    "RETURN 1 ;; RETURN 2",
    "COMMIT; MATCH (e) DETACH DELETE e",
]
LADYBUG = [
    "LOAD FROM '{secret}' RETURN *",
    "load from '{secret}' return *",
    "LoAd /* x */ FROM\n'{secret}' RETURN *",
    "LOAD WITH HEADERS (k STRING) FROM '{secret}' RETURN *",
    "MATCH (e:Entity) WITH e LIMIT 1 LOAD FROM '{secret}' RETURN *",
    "COPY (MATCH (e:Entity) RETURN e.name) TO '{out}'",
    "COPY Entity FROM '{secret}'",
    "EXPORT DATABASE '{out}'",
    "IMPORT DATABASE '{dir}'",
    "ATTACH '{out}' AS other (dbtype lbug)",
    "INSTALL json",
    "LOAD EXTENSION json",
    "CALL threads=1",
    "CREATE NODE TABLE Stolen(k STRING, PRIMARY KEY(k))",
    "DROP TABLE Entity",
    "BEGIN TRANSACTION",
    "CHECKPOINT",
    "EXPLAIN LOAD FROM '{secret}' RETURN *",
    "PROFILE LOAD FROM '{secret}' RETURN *",
    "\uff2c\uff2f\uff21\uff24 FROM '{secret}' RETURN *",  # fullwidth look-alikes of LOAD
    "L\u039fAD FROM '{secret}' RETURN *",  # a Greek capital omicron for the O
    "MATCH (e:Entity) RETURN e \u037e LOAD FROM '{secret}' RETURN *",  # a Greek question mark for the ;
]
NEO4J = [
    "LOAD CSV FROM 'file:///{secret_name}' AS line RETURN line",
    "load csv from 'file:///{secret_name}' as line return line",
    "LOAD CSV WITH HEADERS FROM 'http://127.0.0.1:9/x.csv' AS line RETURN line",
    "CALL { CREATE (:Entity {uid: 'x'}) } RETURN 1",
    "CALL () { CREATE (:Entity {uid: 'x'}) } RETURN 1",
    "FOREACH (x IN [1] | CREATE (:Entity {uid: 'x'}))",
    "CALL db.createLabel('Stolen')",
    "CALL dbms.components() YIELD name RETURN name",
    "CALL db.clearQueryCaches()",
    "MATCH (e:Entity) CALL db.createProperty('x') RETURN e",
    "CREATE INDEX stolen FOR (n:Entity) ON (n.name)",
    "EXPLAIN CREATE (:Entity {uid: 'x'})",
    "PROFILE MATCH (e) RETURN e",
    "USING PERIODIC COMMIT LOAD CSV FROM 'file:///x' AS l CREATE (:X)",
]


@pytest.fixture
def outside(tmp_path: Path) -> dict[str, str]:
    """A secret outside the graph's directory, and places a statement might try to write to."""
    secret = tmp_path / "outside" / "private.csv"
    secret.parent.mkdir()
    secret.write_text(f"k\n{SECRET}\n")
    return {
        "secret": str(secret),
        "secret_name": secret.name,
        "out": str(tmp_path / "outside" / "written"),
        "dir": str(secret.parent),
    }


def fill(statement: str, places: dict[str, str]) -> str:
    for name, value in places.items():
        statement = statement.replace("{" + name + "}", value)
    return statement


async def _refused(store: GraphStore, statement: str, outside: dict[str, str]) -> None:
    before = await dump(store, "s1")
    with pytest.raises((ReadOnlyQueryError, GraphQueryError)) as refused:
        rows = await store.query(statement)
        assert SECRET not in repr(rows)
    assert SECRET not in str(refused.value)
    assert await dump(store, "s1") == before
    assert sorted(path.name for path in Path(outside["dir"]).iterdir()) == ["private.csv"]


@pytest.mark.parametrize("statement", BOTH)
async def test_writes_are_refused_on_both_backends(
    graph_store: GraphStore, statement: str, outside: dict[str, str]
) -> None:
    await project(graph_store, work_story().events)
    await _refused(graph_store, statement, outside)


@pytest.mark.parametrize("statement", LADYBUG)
async def test_ladybug_touches_no_file_and_no_extension(
    tmp_path: Path, statement: str, outside: dict[str, str]
) -> None:
    async with LadybugGraphStore(tmp_path / "store" / "graph.lbug") as store:
        await project(store, work_story().events)
        await _refused(store, fill(statement, outside), outside)


@pytest.mark.parametrize("statement", NEO4J)
async def test_neo4j_touches_no_file_and_changes_nothing(
    neo4j_endpoint: Neo4jEndpoint, statement: str, outside: dict[str, str]
) -> None:
    endpoint = neo4j_endpoint
    async with Neo4jGraphStore(endpoint.uri, user=endpoint.user, password=endpoint.password) as store:
        await store.clear()
        await project(store, work_story().events)
        labels = await store.query("CALL db.labels() YIELD label RETURN label ORDER BY label")
        await _refused(store, fill(statement, outside), outside)
        assert await store.query("CALL db.labels() YIELD label RETURN label ORDER BY label") == labels


@pytest.mark.parametrize(
    "statement",
    [
        "MATCH (e:Entity) WHERE e.entity_type = $t RETURN e.name AS name ORDER BY name",
        "MATCH (e:Entity) WITH e.entity_type AS kind, count(*) AS n RETURN kind, n ORDER BY kind",
        "MATCH (a:Event)-[:NEXT_EVENT]->(b:Event) WHERE a.session = 's1' RETURN count(*) AS n",
        "MATCH (e:Entity) OPTIONAL MATCH (e)-[r:RELATES]->(t:Entity) RETURN e.name, count(t) AS n",
        "UNWIND [3, 1, 2] AS x RETURN x ORDER BY x SKIP 1 LIMIT 1",
        "MATCH (e:Entity) WHERE EXISTS { MATCH (e)-[:RELATES]->() } RETURN count(e) AS n",
        "RETURN 'LOAD FROM /etc/passwd' AS text",  # the words alone are data, not a clause
    ],
)
async def test_reads_still_work(graph_store: GraphStore, statement: str) -> None:
    await project(graph_store, work_story().events)
    rows = await graph_store.query(statement, {"t": "goal"} if "$t" in statement else None)
    assert isinstance(rows, list)
    if "$t" in statement:
        assert rows == [{"name": "goal-1"}]
    if statement.startswith("RETURN"):
        assert rows == [{"text": "LOAD FROM /etc/passwd"}]


async def test_catalogue_functions_and_procedures_are_allowed(graph_store: GraphStore, backend: str) -> None:
    await project(graph_store, work_story().events)
    if backend == "ladybug":
        rows = await graph_store.query("CALL show_tables() RETURN name")
    else:
        rows = await graph_store.query("CALL db.labels() YIELD label RETURN label AS name")
    assert "Entity" in {row["name"] for row in rows}


_FRAGMENTS = [
    "MATCH (e:Entity)",
    "RETURN e.name",
    "RETURN *",
    "LOAD FROM '{secret}'",
    "load from '{secret}'",
    "COPY (RETURN 1) TO '{out}'",
    "CREATE (:Entity {uid: 'h'})",
    "SET e.name = 'h'",
    "DELETE e",
    "ATTACH '{out}' AS o (dbtype lbug)",
    ";",
    "/*",
    "*/",
    "//",
    "\n",
    "'",
    "WITH e",
    "CALL show_tables()",
    "CALL threads=1",
    "INSTALL json",
    "UNWIND [1] AS x",
]


@pytest.fixture(scope="module")
def story_graph(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The work story projected once into a LadybugDB file, and its dump: each example starts from a copy."""
    path = tmp_path_factory.mktemp("story") / "graph.lbug"

    async def build() -> object:
        async with LadybugGraphStore(path) as store:
            await project(store, work_story().events)
            return await dump(store, "s1")

    return path, asyncio.run(build())


def _copy(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target)
    else:
        shutil.copyfile(source, target)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=7))
def test_no_sequence_of_fragments_gets_past_the_plan(
    tmp_path_factory: pytest.TempPathFactory, story_graph: tuple[Path, object], fragments: list[str]
) -> None:
    """Any text built from dangerous fragments either runs as a pure read or is refused, on LadybugDB."""
    root = tmp_path_factory.mktemp("fuzz")
    secret = root / "private.csv"
    secret.write_text(f"k\n{SECRET}\n")
    statement = fill(" ".join(fragments), {"secret": str(secret), "out": str(root / "written")})
    template, before = story_graph
    _copy(template, root / "graph.lbug")

    async def attempt() -> None:
        async with LadybugGraphStore(root / "graph.lbug") as store:
            try:
                rows = await store.query(statement)
            except (ReadOnlyQueryError, GraphQueryError):
                rows = []
            assert SECRET not in repr(rows)
            assert await dump(store, "s1") == before

    asyncio.run(attempt())
    assert sorted(path.name for path in root.iterdir()) == ["graph.lbug", "private.csv"]


def test_plan_checks_refuse_what_they_do_not_know() -> None:
    with pytest.raises(ReadOnlyQueryError, match="NEW_OPERATOR"):
        refuse_ladybug_plan(["│ RESULT_COLLECTOR[1] │\n│ NEW_OPERATOR[0] │"])
    with pytest.raises(ReadOnlyQueryError, match="whole"):
        refuse_ladybug_plan(["│ RESULT_COLLECTOR[2] │\n│ PROJECTION[0] │"])  # operator 1 is missing
    with pytest.raises(ReadOnlyQueryError, match="one statement"):
        refuse_ladybug_plan(["│ RESULT_COLLECTOR[0] │", "│ RESULT_COLLECTOR[0] │"])
    call = {"operatorType": "ProcedureCall@neo4j", "args": {"Details": "apoc.load.json($x)"}}
    with pytest.raises(ReadOnlyQueryError, match=r"apoc\.load\.json"):
        refuse_neo4j_plan({"operatorType": "ProduceResults@neo4j", "children": [call]})
    with pytest.raises(ReadOnlyQueryError, match="no plan"):
        refuse_neo4j_plan(None)
