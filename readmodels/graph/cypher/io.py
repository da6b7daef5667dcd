"""Reads written once for every backend: a read is a generator that yields Cypher and receives rows.

LadybugDB's driver is synchronous and Neo4j's is asynchronous; the Cypher of a typed read is the same on
both. So a read does no I/O itself: it yields `(statement, params)`, is sent back the result rows, and
returns its value; `run_sync` and `run_async` drive it over a backend's own way of executing.

A read that looks up many versions by key yields a `PerKey` instead: a statement written for one key.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, NamedTuple, TypeVar

T = TypeVar("T")
Row = dict[str, Any]
Query = tuple[str, dict[str, Any]]
EACH_KEY: Final = "each_key"
"""The parameter (`$each_key`) of a `PerKey` statement."""
_EACH_KEY_PARAM: Final = re.compile(r"\$each_key\b")


class PerKey(NamedTuple):
    """`statement` once for each of `keys`, `$each_key` bound to it: the rows of every run, in the order of
    `keys`. An ORDER BY, DISTINCT or LIMIT in it applies to one key's rows.

    LadybugDB seeks a primary key only for a literal `{uid: $each_key}`: `uid IN $uids` (or an UNWIND)
    scans the whole table, so its cost grew with the graph (70 keys at 53,000 events: 16 ms against
    0.5 ms one by one). Neo4j seeks its index either way, and gets one statement (`unwound`)."""

    statement: str
    keys: list[Any]
    params: dict[str, Any]


Reading = Generator[Query | PerKey, list[Row], T]
Execute = Callable[[str, dict[str, Any] | None], list[Row]]
ExecuteAsync = Callable[[str, dict[str, Any]], Awaitable[list[Row]]]


def run_sync(reading: Reading[T], execute: Execute) -> T:
    """Drive `reading` with a synchronous `execute` (a `PerKey` runs once per key); return its value."""
    try:
        query = next(reading)
        while True:
            if isinstance(query, PerKey):
                rows = [row for key in query.keys for row in execute(query.statement, _bound(query, key))]
            else:
                rows = execute(*query)
            query = reading.send(rows)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(reading: Reading[T], execute: ExecuteAsync) -> T:
    """Drive `reading` with an asynchronous `execute` (a `PerKey` as one statement, `unwound`); return its
    value."""
    try:
        query = next(reading)
        while True:
            statement, params = unwound(query) if isinstance(query, PerKey) else query
            query = reading.send(await execute(statement, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def unwound(query: PerKey) -> Query:
    """`query` as one Cypher 5 statement: each key in a subquery of its own (Neo4j 5.23+), so that what
    the statement orders, dedupes or limits stays per key."""
    inner = _EACH_KEY_PARAM.sub(EACH_KEY, query.statement)
    keys = f"{EACH_KEY}s"
    if keys in query.params or EACH_KEY in query.params:
        raise ValueError(f"a PerKey statement's own parameters may not be named {EACH_KEY} or {keys}")
    return (
        f"UNWIND ${keys} AS {EACH_KEY} CALL ({EACH_KEY}) {{ {inner} }} RETURN *",
        {**query.params, keys: query.keys},
    )


def _bound(query: PerKey, key: Any) -> dict[str, Any]:
    return {**query.params, EACH_KEY: key}
