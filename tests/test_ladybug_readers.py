"""`LadybugReaders`: reads of one LadybugDB database answered by several threads at once."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import ladybug
import pytest

from readmodels.embedded.ladybug_io import open_database, run_rows
from readmodels.embedded.ladybug_readers import LadybugReaders
from readmodels.graph.protocol import GraphStoreError

pytestmark = pytest.mark.anyio


def database_with_rows(path: Path) -> ladybug.Database:
    database = open_database(str(path))
    writer = ladybug.Connection(database)
    writer.execute("CREATE NODE TABLE item (id INT64, PRIMARY KEY (id))")
    writer.execute("UNWIND range(1, 100) AS n CREATE (:item {id: n})")
    writer.close()
    return database


async def test_reads_run_at_once_each_on_its_own_connection(tmp_path: Path) -> None:
    database = database_with_rows(tmp_path / "db.lbug")
    readers = LadybugReaders(lambda: database, count=3)
    readers.start()
    together = threading.Barrier(3, timeout=10)  # broken (an error) unless three reads are in at once

    def read() -> tuple[int, int]:
        together.wait()
        connection = readers.connection()
        count = run_rows(connection, "MATCH (i:item) RETURN count(i) AS n", None)[0]["n"]
        return id(connection), int(count)

    answers = await asyncio.gather(*(readers.run(read) for _ in range(3)))
    assert [count for _, count in answers] == [100, 100, 100]
    assert len({connection for connection, _ in answers}) == 3
    await readers.close()
    database.close()


async def test_held_readers_let_the_database_be_reopened_and_queued_reads_see_it(tmp_path: Path) -> None:
    path = tmp_path / "db.lbug"
    databases = [database_with_rows(path)]
    readers = LadybugReaders(lambda: databases[-1], count=2)
    readers.start()

    def count() -> int:
        return int(run_rows(readers.connection(), "MATCH (i:item) RETURN count(i) AS n", None)[0]["n"])

    assert list(await asyncio.gather(readers.run(count), readers.run(count))) == [100, 100]
    async with readers.held():
        queued = [asyncio.ensure_future(readers.run(count)) for _ in range(4)]
        await asyncio.sleep(0.05)
        assert not any(read.done() for read in queued)  # they wait for the reopen
        databases[-1].close()  # a connection left open on it would answer "Database is closed"
        databases.append(open_database(str(path)))
        writer = ladybug.Connection(databases[-1])
        writer.execute("CREATE (:item {id: 101})")
        writer.close()
    assert await asyncio.gather(*queued) == [101] * 4
    await readers.close()
    with pytest.raises(GraphStoreError, match="not open"):
        await readers.run(count)
    databases[-1].close()


def test_at_least_one_reader() -> None:
    with pytest.raises(ValueError, match="readers: at least 1"):
        LadybugReaders(lambda: None, count=0)
