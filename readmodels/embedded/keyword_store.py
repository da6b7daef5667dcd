"""`SqliteKeywordStore`: the embedded keyword read model, SQLite FTS5 with BM25 ranking.

SQLite ships with Python, FTS5 ranks with BM25 out of the box, and its Porter stemmer matches "refresh",
"refreshes" and "refreshing" alike. Words common to much of the index are scored but not matched on
(`readmodels.keyword.common_words`), which keeps a question from scoring most of the index. One file per
generation (`readmodels.embedded.sqlite_db.SqliteDb`); a batch and its checkpoints are one transaction.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from eventloom.event import citation
from readmodels.documents import DocKind, EventDocs, MemoryDoc
from readmodels.embedded.sqlite_db import (
    CHECKPOINTS_TABLE,
    SqliteDb,
    marks,
    read_checkpoints,
    save_checkpoints,
    unapplied,
)
from readmodels.keyword.common_words import CommonWords
from readmodels.keyword.protocol import MAX_QUERY_WORDS, TITLE_WEIGHT, KeywordHit

_WORD: Final = re.compile(r"\w+", re.UNICODE)
READER_MMAP_BYTES: Final = 1 << 30
"""How much of the file a reader maps (address space, not memory): a search reads the documents it
scores, page by page across the file, through the page cache instead of a read() per page
(`bench/keyword_search.py`, 100,000 events, common words scored: p50 6.9 -> 4.7 ms, p95 35 -> 28 ms)."""

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, "
    "event_hash TEXT NOT NULL, event_type TEXT NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL, "
    "title TEXT NOT NULL, text TEXT NOT NULL, entity_name TEXT, entity_type TEXT, path TEXT, "
    "line_start INTEGER, line_end INTEGER)",
    "CREATE INDEX IF NOT EXISTS docs_session_seq ON docs(session, seq)",
    "CREATE INDEX IF NOT EXISTS docs_kind ON docs(kind)",  # a search of kinds the index lacks ends at once
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(title, text, content='docs', content_rowid='id', "
    "tokenize='porter unicode61')",
    CHECKPOINTS_TABLE,
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
# Statements are built from these constant names and `?` placeholders only, never from input.
_INSERT_DOC: Final = f"INSERT INTO docs ({', '.join(_DOC_COLUMNS)}) VALUES ({marks(len(_DOC_COLUMNS))})"  # noqa: S608
_SELECT_HITS: Final = (
    f"SELECT {', '.join('d.' + name for name in _DOC_COLUMNS)}, d.id, "  # noqa: S608
    f"-bm25(docs_fts, {TITLE_WEIGHT}, 1.0) AS score FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid WHERE "
)
_ORDER_HITS: Final = "ORDER BY score DESC, d.session, d.seq, d.id LIMIT ?"
_ID: Final = len(_DOC_COLUMNS)
"""Where a hit's row has the document's id (its FTS5 rowid), before its score."""


def query_words(text: str) -> list[str]:
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))[:MAX_QUERY_WORDS]


def match_expression(text: str, words: list[str] | None = None) -> str | None:
    """The FTS5 query for free text: each word quoted (no operators get through), any of them matching."""
    return " OR ".join(f'"{word}"' for word in (query_words(text) if words is None else words)) or None


class SqliteKeywordStore:
    """`KeywordStore` in the SQLite database at `path` (created on first open)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = SqliteDb(self.path, _SCHEMA, reader_mmap_bytes=READER_MMAP_BYTES)
        self._common = CommonWords()

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqliteKeywordStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._db.read(lambda db: read_checkpoints(db, projector, sessions))

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        if not batch:
            return 0
        return await self._db.write(lambda db: _index(db, projector, batch))

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        words = query_words(text)
        if not words or limit <= 0:
            return []
        conditions = ["docs_fts MATCH ?"]
        params: list[Any] = []  # after the expression, known once the common words are (in the reader)
        if session is not None:
            conditions.append("d.session = ?")
            params.append(session)
        if as_of is not None:
            conditions.append("d.ts <= ?")
            params.append(as_of)
        if kinds:
            conditions.append(f"d.kind IN ({marks(len(kinds))})")
            params.extend(kinds)
        statement = f"{_SELECT_HITS}{' AND '.join(conditions)} {_ORDER_HITS}"
        params.append(limit)
        rows = await self._db.read(lambda db: self._search(db, words, statement, params, limit))
        return [_hit(row) for row in rows]

    def _search(
        self, db: sqlite3.Connection, words: list[str], statement: str, params: list[Any], limit: int
    ) -> list[tuple[Any, ...]]:
        """The best `limit` documents matching a word that is not common, by BM25 over every word.

        Common words are not matched on (`readmodels.keyword.common_words`; those in half the documents
        or more, which weigh nothing, not even scored): the documents matched are matched again with a
        common word required too, whose bm25() then covers every word, and each document keeps its
        better score. Exact for the best `limit`: a document left with its first score (in the second
        match, but not among its best `limit`) has `limit` better ones there.
        """
        matched, scored = self._common.split(db, words)
        rare = match_expression("", matched)
        rows = db.execute(statement, [rare, *params]).fetchall()
        if not scored or not rows:
            return rows
        both = f"({rare}) AND ({match_expression('', scored)})"
        best = {row[_ID]: row for row in rows}
        for row in db.execute(statement, [both, *params]).fetchall():
            best[row[_ID]] = row  # the same document, with the common words' part added
        ranked = sorted(best.values(), key=lambda row: (-row[-1], row[0], row[1], row[_ID]))
        return ranked[:limit]


def _any_of_kinds(db: sqlite3.Connection, kinds: Sequence[DocKind]) -> bool:
    statement = f"SELECT 1 FROM docs WHERE kind IN ({marks(len(kinds))}) LIMIT 1"  # noqa: S608
    return db.execute(statement, tuple(kinds)).fetchone() is not None


def _index(db: sqlite3.Connection, projector: str, batch: Sequence[EventDocs]) -> int:
    todo = unapplied(db, projector, batch)
    for doc in (doc for event in todo for doc in event.docs):
        cursor = db.execute(_INSERT_DOC, tuple(getattr(doc, name) for name in _DOC_COLUMNS))
        db.execute(
            "INSERT INTO docs_fts (rowid, title, text) VALUES (?, ?, ?)",
            (cursor.lastrowid, doc.title, doc.text),
        )
    save_checkpoints(db, projector, todo)
    return len(todo)


def _hit(row: tuple[Any, ...]) -> KeywordHit:
    doc = MemoryDoc(**dict(zip(_DOC_COLUMNS, row[: len(_DOC_COLUMNS)], strict=True)))
    cited = citation(doc.session, doc.seq, doc.event_hash)
    return KeywordHit(doc=doc, score=round(float(row[-1]), 6), citation=cited)
