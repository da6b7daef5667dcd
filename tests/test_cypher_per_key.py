"""`PerKey`: a read's statement for one key, run once per key (LadybugDB) or unwound into one (Neo4j)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import ladybug
import pytest

from readmodels.embedded.ladybug_io import open_database, run_rows
from readmodels.graph.cypher.io import PerKey, Reading, Row, run_async, run_sync, unwound


def items_by_id(ids: list[int]) -> Reading[list[int]]:
    rows = yield PerKey("MATCH (i:item) WHERE i.id = $each_key RETURN i.id AS id", ids, {})
    return [int(row["id"]) for row in rows]


def test_each_key_is_looked_up_in_the_order_given_and_by_primary_key(tmp_path: Path) -> None:
    database = open_database(str(tmp_path / "db.lbug"))
    connection = ladybug.Connection(database)
    connection.execute("CREATE NODE TABLE item (id INT64, PRIMARY KEY (id))")
    connection.execute("UNWIND range(1, 50) AS n CREATE (:item {id: n})")
    executed: list[dict[str, Any] | None] = []

    def execute(statement: str, params: dict[str, Any] | None) -> list[Row]:
        executed.append(params)
        return run_rows(connection, statement, params)

    assert run_sync(items_by_id([7, 3, 99, 12]), execute) == [7, 3, 12]  # 99: none
    assert [params and params["each_key"] for params in executed] == [7, 3, 99, 12]
    plan = run_rows(connection, "EXPLAIN MATCH (i:item) WHERE i.id = $each_key RETURN i.id", {"each_key": 7})
    assert "PRIMARY_KEY_SCAN" in str(plan)  # what `PerKey` is for: no scan of the whole table
    connection.close()
    database.close()


@pytest.mark.anyio
async def test_an_async_backend_gets_one_statement_with_each_key_in_its_own_subquery() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []

    async def execute(statement: str, params: dict[str, Any]) -> list[Row]:
        seen.append((statement, params))
        return [{"id": key} for key in params["each_keys"]]

    assert await run_async(items_by_id([2, 1]), execute) == [2, 1]
    [(statement, params)] = seen
    assert statement == (
        "UNWIND $each_keys AS each_key CALL (each_key) "
        "{ MATCH (i:item) WHERE i.id = each_key RETURN i.id AS id } RETURN *"
    )
    assert params == {"each_keys": [2, 1]}


def test_a_statement_may_not_name_its_own_parameters_as_the_keys() -> None:
    for name in ("each_key", "each_keys"):
        with pytest.raises(ValueError, match=re.escape("may not be named each_key or each_keys")):
            unwound(PerKey("MATCH (i:item) WHERE i.id = $each_key RETURN i", [1], {name: 1}))
    statement, _ = unwound(PerKey("RETURN $each_key_count, $each_key AS k", [1], {"each_key_count": 2}))
    assert "$each_key_count" in statement and "each_key AS k" in statement  # only the whole name is bound
