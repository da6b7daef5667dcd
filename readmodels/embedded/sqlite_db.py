"""`SqliteDb`: an embedded read model's SQLite file, used off the event loop.

One writer thread and `READERS` reader threads, each with its own connection. WAL mode lets readers see the
last commit while a batch is being written; several readers let a question's lanes search at once.
`write` runs a function in one transaction (`BEGIN IMMEDIATE`): it commits whole or not at all.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, TypeVar

from readmodels.tracking import Applied, past_checkpoints

T = TypeVar("T")
READERS: Final = 2


Migrate = Callable[[sqlite3.Connection], None]
"""Brings a file made by an older schema up to date, in one transaction, after the schema's statements."""


class SqliteDb:
    def __init__(
        self,
        path: Path,
        schema: Sequence[str],
        *,
        read_only: bool = False,
        migrate: Migrate | None = None,
        reader_mmap_bytes: int = 0,
    ) -> None:
        self.path = path
        self._schema = schema
        self._migrate = migrate
        self._read_only = read_only  # another process writes it: open no writer, change no schema
        self._reader_mmap_bytes = reader_mmap_bytes  # readers map up to this much of the file (0: none)
        self._writer: sqlite3.Connection | None = None
        self._readers = threading.local()
        self._reader_connections: list[sqlite3.Connection] = []
        self._write_thread: ThreadPoolExecutor | None = None
        self._read_thread: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        if self._write_thread is not None:
            return
        self._write_thread = ThreadPoolExecutor(1, thread_name_prefix=f"sqlite-write-{self.path.stem}")
        self._read_thread = ThreadPoolExecutor(READERS, thread_name_prefix=f"sqlite-read-{self.path.stem}")
        if not self._read_only:
            await self._run(self._write_thread, self._open_writer)
        await self._run(self._read_thread, self._reader)  # fail at open, not at the first read

    def _open_writer(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._writer.execute("PRAGMA journal_mode=WAL")
        for statement in self._schema:
            self._writer.execute(statement)
        if self._migrate is not None:
            self._writer.execute("BEGIN IMMEDIATE")
            try:
                self._migrate(self._writer)
                self._writer.execute("COMMIT")
            except BaseException:
                self._writer.execute("ROLLBACK")
                raise

    def _reader(self) -> sqlite3.Connection:
        """This reader thread's own connection (opened on its first read)."""
        connection: sqlite3.Connection | None = getattr(self._readers, "connection", None)
        if connection is None:
            connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            if self._reader_mmap_bytes:
                connection.execute(f"PRAGMA mmap_size={int(self._reader_mmap_bytes)}")
            self._readers.connection = connection
            self._reader_connections.append(connection)
        return connection

    async def close(self) -> None:
        if self._read_thread is not None:
            await asyncio.to_thread(self._read_thread.shutdown, True)  # no read in flight at the close
            for connection in self._reader_connections:
                connection.close()
            self._reader_connections.clear()
        if self._write_thread is not None:
            await self._run(self._write_thread, lambda: _close(self._writer))
            self._write_thread.shutdown(wait=False)
        self._writer = None
        self._readers = threading.local()
        self._read_thread = self._write_thread = None

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` in one write transaction, in the writer thread."""

        def transaction() -> T:
            db = _open(self._writer)
            db.execute("BEGIN IMMEDIATE")
            try:
                result = fn(db)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return result

        return await self._run(self._write_thread, transaction)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """`fn(connection)` in the reader thread (sees the last committed state)."""
        return await self._run(self._read_thread, lambda: fn(self._reader()))

    async def _run(self, pool: ThreadPoolExecutor | None, fn: Callable[[], T]) -> T:
        if pool is None:
            raise RuntimeError(f"{self.path} is not open")
        return await asyncio.get_running_loop().run_in_executor(pool, fn)


def _open(connection: sqlite3.Connection | None) -> sqlite3.Connection:
    if connection is None:
        raise RuntimeError("the database is not open")
    return connection


def _close(connection: sqlite3.Connection | None) -> None:
    if connection is not None:
        connection.close()


def marks(count: int) -> str:
    """`?, ?, ...`: placeholders for `count` parameters."""
    return ", ".join("?" for _ in range(count))


CHECKPOINTS_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS checkpoints (projector TEXT NOT NULL, session TEXT NOT NULL, "
    "seq INTEGER NOT NULL, event_hash TEXT NOT NULL, PRIMARY KEY (projector, session))"
)
_UPSERT_CHECKPOINT: Final = (
    "INSERT INTO checkpoints (projector, session, seq, event_hash) VALUES (?, ?, ?, ?) ON CONFLICT "
    "(projector, session) DO UPDATE SET seq = excluded.seq, event_hash = excluded.event_hash"
)


A = TypeVar("A", bound=Applied)


def read_checkpoints(db: sqlite3.Connection, projector: str, sessions: Sequence[str]) -> dict[str, int]:
    wanted = list(dict.fromkeys(sessions))
    if not wanted:
        return {}
    rows = db.execute(
        f"SELECT session, seq FROM checkpoints WHERE projector = ? AND session IN ({marks(len(wanted))})",  # noqa: S608
        [projector, *wanted],
    ).fetchall()
    return {str(session): int(seq) for session, seq in rows}


def unapplied(db: sqlite3.Connection, projector: str, batch: Sequence[A]) -> list[A]:
    """The items of `batch` past the checkpoint, in order (inside the batch's write transaction)."""
    return past_checkpoints(read_checkpoints(db, projector, [item.session for item in batch]), batch)


def save_checkpoints(db: sqlite3.Connection, projector: str, applied: Sequence[Applied]) -> None:
    last = {item.session: item for item in applied}
    db.executemany(
        _UPSERT_CHECKPOINT,
        [(projector, session, item.seq, item.event_hash) for session, item in last.items()],
    )
