"""`SqliteKeywordStore`: the embedded keyword read model, SQLite FTS5 with BM25 ranking.

SQLite ships with Python, FTS5 ranks with BM25 out of the box, and its Porter stemmer matches "refresh",
"refreshes" and "refreshing" alike. One file per generation; one writer thread and one reader thread, each
with its own connection (WAL mode: readers see the last commit while a batch is written). A batch and its
checkpoints are one transaction.
"""

from __future__ import annotations

import asyncio
import functools
import re
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, TypeVar

from eventloom.event import citation
from readmodels.keyword.protocol import DocKind, EventDocs, KeywordDoc, KeywordHit

T = TypeVar("T")
_WORD: Final = re.compile(r"\w+", re.UNICODE)
MAX_QUERY_WORDS: Final = 32
TITLE_WEIGHT: Final = 2.0
"""BM25 weight of the title column (entity names, document titles) against the body text's 1.0."""

_SCHEMA: Final = (
    "PRAGMA journal_mode=WAL",
    "CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, "
    "event_hash TEXT NOT NULL, event_type TEXT NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL, "
    "title TEXT NOT NULL, text TEXT NOT NULL, entity_name TEXT, entity_type TEXT, path TEXT, "
    "line_start INTEGER, line_end INTEGER)",
    "CREATE INDEX IF NOT EXISTS docs_session_seq ON docs(session, seq)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(title, text, content='docs', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TABLE IF NOT EXISTS checkpoints (projector TEXT NOT NULL, session TEXT NOT NULL, "
    "seq INTEGER NOT NULL, event_hash TEXT NOT NULL, PRIMARY KEY (projector, session))",
)
_DOC_COLUMNS: Final = (
    "session",
    "seq",
    "event_hash",
    "event_type",
    "ts",
    "kind",
    "title",
    "text",
    "entity_name",
    "entity_type",
    "path",
    "line_start",
    "line_end",
)


# Statements below are built from these constant names and `?` placeholders only, never from input.
_INSERT_DOC: Final = (
    f"INSERT INTO docs ({', '.join(_DOC_COLUMNS)}) VALUES ({', '.join('?' for _ in _DOC_COLUMNS)})"  # noqa: S608
)
_SELECT_HITS: Final = (
    f"SELECT {', '.join('d.' + name for name in _DOC_COLUMNS)}, "  # noqa: S608
    f"-bm25(docs_fts, {TITLE_WEIGHT}, 1.0) AS score FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid WHERE "
)
_ORDER_HITS: Final = "ORDER BY score DESC, d.session, d.seq, d.id LIMIT ?"
_UPSERT_CHECKPOINT: Final = (
    "INSERT INTO checkpoints (projector, session, seq, event_hash) VALUES (?, ?, ?, ?) ON CONFLICT "
    "(projector, session) DO UPDATE SET seq = excluded.seq, event_hash = excluded.event_hash"
)


def _marks(count: int) -> str:
    return ", ".join("?" for _ in range(count))


def match_expression(text: str) -> str | None:
    """The FTS5 query for free text: each word quoted (no operators get through), any of them matching."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))[:MAX_QUERY_WORDS]
    return " OR ".join(f'"{word}"' for word in words) or None


class SqliteKeywordStore:
    """`KeywordStore` in the SQLite database at `path` (created on first open)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._write_thread: ThreadPoolExecutor | None = None
        self._read_thread: ThreadPoolExecutor | None = None

    async def open(self) -> None:
        if self._write_thread is not None:
            return
        self._write_thread = ThreadPoolExecutor(1, thread_name_prefix="keyword-write")
        self._read_thread = ThreadPoolExecutor(1, thread_name_prefix="keyword-read")
        await self._in(self._write_thread, self._open_writer)
        await self._in(self._read_thread, self._open_reader)

    def _open_writer(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        for statement in _SCHEMA:
            self._writer.execute(statement)

    def _open_reader(self) -> None:
        self._reader = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)

    async def close(self) -> None:
        for pool, attribute in ((self._read_thread, "_reader"), (self._write_thread, "_writer")):
            if pool is not None:
                await self._in(pool, functools.partial(self._close_connection, attribute))
                pool.shutdown(wait=False)
        self._read_thread = self._write_thread = None

    def _close_connection(self, attribute: str) -> None:
        connection = getattr(self, attribute)
        if connection is not None:
            connection.close()
            setattr(self, attribute, None)

    async def __aenter__(self) -> SqliteKeywordStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _in(self, pool: ThreadPoolExecutor | None, fn: Callable[[], T]) -> T:
        if pool is None:
            raise RuntimeError("the keyword store is not open")
        return await asyncio.get_running_loop().run_in_executor(pool, fn)

    # -- writes ------------------------------------------------------------------------------------------

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(sessions))
        return await self._in(
            self._read_thread, lambda: _checkpoints(self._connection("_reader"), projector, wanted)
        )

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        if not batch:
            return 0
        events = list(batch)
        return await self._in(self._write_thread, lambda: self._apply_sync(projector, events))

    def _connection(self, attribute: str) -> sqlite3.Connection:
        connection = getattr(self, attribute)
        if connection is None:
            raise RuntimeError("the keyword store is not open")
        assert isinstance(connection, sqlite3.Connection)
        return connection

    def _apply_sync(self, projector: str, events: list[EventDocs]) -> int:
        db = self._connection("_writer")
        db.execute("BEGIN IMMEDIATE")
        try:
            applied = _checkpoints(db, projector, list(dict.fromkeys(e.session for e in events)))
            todo = []
            for event in events:
                if event.seq > applied.get(event.session, 0):
                    applied[event.session] = event.seq
                    todo.append(event)
            for doc in (doc for event in todo for doc in event.docs):
                cursor = db.execute(_INSERT_DOC, tuple(getattr(doc, name) for name in _DOC_COLUMNS))
                db.execute(
                    "INSERT INTO docs_fts (rowid, title, text) VALUES (?, ?, ?)",
                    (cursor.lastrowid, doc.title, doc.text),
                )
            last = {event.session: event for event in todo}
            db.executemany(
                _UPSERT_CHECKPOINT,
                [(projector, session, event.seq, event.event_hash) for session, event in last.items()],
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return len(todo)

    # -- reads -------------------------------------------------------------------------------------------

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        expression = match_expression(text)
        if expression is None or limit <= 0:
            return []
        conditions = ["docs_fts MATCH ?"]
        params: list[Any] = [expression]
        if session is not None:
            conditions.append("d.session = ?")
            params.append(session)
        if as_of is not None:
            conditions.append("d.ts <= ?")
            params.append(as_of)
        if kinds:
            conditions.append(f"d.kind IN ({_marks(len(kinds))})")
            params.extend(kinds)
        statement = f"{_SELECT_HITS}{' AND '.join(conditions)} {_ORDER_HITS}"
        params.append(limit)
        rows = await self._in(
            self._read_thread, lambda: self._connection("_reader").execute(statement, params).fetchall()
        )
        return [_hit(row) for row in rows]


def _checkpoints(db: sqlite3.Connection, projector: str, sessions: list[str]) -> dict[str, int]:
    if not sessions:
        return {}
    rows = db.execute(
        f"SELECT session, seq FROM checkpoints WHERE projector = ? AND session IN ({_marks(len(sessions))})",  # noqa: S608
        [projector, *sessions],
    ).fetchall()
    return {str(session): int(seq) for session, seq in rows}


def _hit(row: tuple[Any, ...]) -> KeywordHit:
    fields = dict(zip(_DOC_COLUMNS, row[: len(_DOC_COLUMNS)], strict=True))
    doc = KeywordDoc(**fields)
    return KeywordHit(
        doc=doc, score=round(float(row[-1]), 6), citation=citation(doc.session, doc.seq, doc.event_hash)
    )
