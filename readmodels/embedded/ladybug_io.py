"""Opening a LadybugDB database, running statements on a connection (rows back as dicts) and a rollback
that tolerates an already-ended transaction. Shared by the graph store, the bulk loader and the packs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

import ladybug
import pyarrow as pa

_OPENING = threading.Lock()


def open_database(path: str, **options: Any) -> ladybug.Database:
    """`ladybug.Database(path, **options)`, one at a time in this process.

    The driver loads its native backend on the first open, and marks it tried before the load is done: a
    second thread opening meanwhile is told there is none, falls back to a C library the wheel does not
    ship, and fails ("Could not find lbug C API shared library"). Stores open on threads of their own, and
    a node opens several at once."""
    with _OPENING:
        return ladybug.Database(path, **options)


def run_rows(
    connection: ladybug.Connection, cypher: str | ladybug.PreparedStatement, params: Mapping[str, Any] | None
) -> list[dict[str, Any]]:
    bound = dict(params or {})
    if isinstance(cypher, str) and any(isinstance(value, pa.Table) for value in bound.values()):
        # prepared here, not by `execute`: the driver caches each statement it prepares, keyed by the
        # identity of the table it scans, so every batch added entries never freed (~18 MB per 1,000
        # events of bench/project.py's load, 21 GB at 450,000)
        cypher = ladybug.PreparedStatement(connection, cypher, bound)
    result = connection.execute(cypher, bound)
    results = result if isinstance(result, list) else [result]
    rows: list[dict[str, Any]] = []
    for part in results:
        columns = part.get_column_names()
        while part.has_next():
            values = part.get_next()
            rows.append(dict(values) if isinstance(values, dict) else dict(zip(columns, values, strict=True)))
    return rows


def rollback(connection: ladybug.Connection) -> None:
    with contextlib.suppress(RuntimeError):  # a failed statement may already have ended the transaction
        connection.execute("ROLLBACK")
