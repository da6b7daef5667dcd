"""Reads written once for every backend: a read is a generator that yields Cypher and receives rows.

LadybugDB's driver is synchronous and Neo4j's is asynchronous; the Cypher of a typed read is the same on
both. So a read does no I/O itself: it yields `(statement, params)`, is sent back the result rows, and
returns its value; `run_sync` and `run_async` drive it over a backend's own way of executing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")
Row = dict[str, Any]
Query = tuple[str, dict[str, Any]]
Reading = Generator[Query, list[Row], T]
Execute = Callable[[str, dict[str, Any] | None], list[Row]]
ExecuteAsync = Callable[[str, dict[str, Any]], Awaitable[list[Row]]]


def run_sync(reading: Reading[T], execute: Execute) -> T:
    """Drive `reading` with a synchronous `execute`; return its value."""
    try:
        statement, params = next(reading)
        while True:
            statement, params = reading.send(execute(statement, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def run_async(reading: Reading[T], execute: ExecuteAsync) -> T:
    """Drive `reading` with an asynchronous `execute`; return its value."""
    try:
        statement, params = next(reading)
        while True:
            statement, params = reading.send(await execute(statement, params))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
