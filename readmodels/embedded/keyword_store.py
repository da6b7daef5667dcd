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
from readmodels.documents import DocKind, EventDocs, MemoryDoc, ScoreSpread
from readmodels.embedded.sqlite_db import (
    CHECKPOINTS_TABLE,
    SqliteDb,
    marks,
    read_checkpoints,
    save_checkpoints,
    unapplied,
)
from readmodels.keyword.common_words import CommonWords
from readmodels.keyword.context import CONTEXT_TURNS, with_context
from readmodels.keyword.protocol import CONTEXT_WEIGHT, MAX_QUERY_WORDS, TITLE_WEIGHT, KeywordHit

_WORD: Final = re.compile(r"\w+", re.UNICODE)
READER_MMAP_BYTES: Final = 1 << 30
"""How much of the file a reader maps (address space, not memory): a search reads the documents it
scores, page by page across the file, through the page cache instead of a read() per page
(`bench/keyword_search.py`, 100,000 events, common words scored: p50 6.9 -> 4.7 ms, p95 35 -> 28 ms)."""

_FTS: Final = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(title, text, context, content='docs', "
    "content_rowid='id', tokenize='porter unicode61')"
)
"""A turn's borrowed words (`context`, `readmodels.keyword.context`) are a column of their own."""
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS docs (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL, "
    "event_hash TEXT NOT NULL, event_type TEXT NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL, "
    "title TEXT NOT NULL, text TEXT NOT NULL, entity_name TEXT, entity_type TEXT, path TEXT, "
    "line_start INTEGER, line_end INTEGER, context TEXT NOT NULL DEFAULT '')",
    "CREATE INDEX IF NOT EXISTS docs_session_seq ON docs(session, seq)",
    "CREATE INDEX IF NOT EXISTS docs_kind ON docs(kind)",  # a search of kinds the index lacks ends at once
    _FTS,
    CHECKPOINTS_TABLE,
)
_DOC_COLUMNS: Final = (  # a hit's document: all but the context, which is never shown
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
_STORED_COLUMNS: Final = (*_DOC_COLUMNS, "context")
_INSERT_DOC: Final = f"INSERT INTO docs ({', '.join(_STORED_COLUMNS)}) VALUES ({marks(len(_STORED_COLUMNS))})"  # noqa: S608
_EARLIER_TURNS: Final = (  # by docs_session_seq
    "SELECT text FROM docs WHERE kind = 'turn' AND session = ? AND seq < ? ORDER BY seq DESC, id DESC LIMIT ?"
)
_SCORE: Final = f"-bm25(docs_fts, {TITLE_WEIGHT}, 1.0, {CONTEXT_WEIGHT})"  # title, text, context
_SELECT_HITS: Final = (
    f"SELECT {', '.join('d.' + name for name in _DOC_COLUMNS)}, d.id, "  # noqa: S608
    f"{_SCORE} AS score "
    "FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid WHERE "
)
_ORDER_HITS: Final = "ORDER BY score DESC, d.session, d.seq, d.id LIMIT ?"
_ID: Final = len(_DOC_COLUMNS)
"""Where a hit's row has the document's id (its FTS5 rowid), before its score."""
# Materialized: FTS5 computes bm25() only where the match is its own query; the match first, then its docs.
_SUM_SCORES: Final = (
    f"WITH matched AS MATERIALIZED (SELECT {_SCORE} AS score FROM docs_fts "  # noqa: S608
    "CROSS JOIN docs d ON d.id = docs_fts.rowid WHERE {}) "
    "SELECT count(*), coalesce(sum(score), 0), coalesce(sum(score * score), 0) FROM matched"
)
_COUNT_DOCS: Final = "SELECT count(*) FROM docs d WHERE "


def query_words(text: str) -> list[str]:
    return list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))[:MAX_QUERY_WORDS]


def match_expression(text: str, words: list[str] | None = None) -> str | None:
    """The FTS5 query for free text: each word quoted (no operators get through), any of them matching."""
    return " OR ".join(f'"{word}"' for word in (query_words(text) if words is None else words)) or None


class SqliteKeywordStore:
    """`KeywordStore` in the SQLite database at `path` (created on first open)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db = SqliteDb(self.path, _SCHEMA, migrate=_add_context, reader_mmap_bytes=READER_MMAP_BYTES)
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
        # the match expression comes first, known once the common words are (in the reader)
        conditions, params = _filters(session, as_of, kinds)
        statement = f"{_SELECT_HITS}{' AND '.join(['docs_fts MATCH ?', *conditions])} {_ORDER_HITS}"
        params.append(limit)
        rows = await self._db.read(lambda db: self._search(db, words, statement, params, limit))
        return [_hit(row) for row in rows]

    async def spread(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
    ) -> ScoreSpread | None:
        """How BM25 scores spread over every document passing the filters (unmatched ones score 0)."""
        conditions, params = _filters(session, as_of, kinds)
        words = query_words(text)
        return await self._db.read(lambda db: self._spread(db, words, conditions, params))

    def _spread(
        self, db: sqlite3.Connection, words: list[str], conditions: list[str], params: list[Any]
    ) -> ScoreSpread | None:
        where = " AND ".join(conditions) or "1"
        documents = int(db.execute(_COUNT_DOCS + where, params).fetchone()[0])
        if not documents:
            return None
        total = squares = 0.0
        # over what the rarer words match, by their part of the score: summing the common words' part too
        # would score every document they match, the cost `CommonWords` spares the search
        expression = match_expression("", self._common.split(db, words).matched) if words else None
        if expression is not None:
            matched = " AND ".join(["docs_fts MATCH ?", *conditions])
            _, total, squares = db.execute(_SUM_SCORES.format(matched), [expression, *params]).fetchone()
        mean = float(total) / documents
        variance = max(0.0, float(squares) / documents - mean * mean)
        return ScoreSpread(documents=documents, mean=mean, std=variance**0.5)

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


def _filters(
    session: str | None, as_of: str | None, kinds: Sequence[DocKind] | None
) -> tuple[list[str], list[Any]]:
    """The conditions on `d` (constant text with `?` placeholders) and their parameters."""
    conditions: list[str] = []
    params: list[Any] = []
    if session is not None:
        conditions.append("d.session = ?")
        params.append(session)
    if as_of is not None:
        conditions.append("d.ts <= ?")
        params.append(as_of)
    if kinds:
        conditions.append(f"d.kind IN ({marks(len(kinds))})")
        params.extend(kinds)
    return conditions, params


def _any_of_kinds(db: sqlite3.Connection, kinds: Sequence[DocKind]) -> bool:
    statement = f"SELECT 1 FROM docs WHERE kind IN ({marks(len(kinds))}) LIMIT 1"  # noqa: S608
    return db.execute(statement, tuple(kinds)).fetchone() is not None


def _index(db: sqlite3.Connection, projector: str, batch: Sequence[EventDocs]) -> int:
    todo = unapplied(db, projector, batch)

    def stored(session: str, seq: int) -> list[str]:
        return [str(row[0]) for row in db.execute(_EARLIER_TURNS, (session, seq, CONTEXT_TURNS))]

    for doc in (doc for event in with_context(todo, stored) for doc in event.docs):
        cursor = db.execute(_INSERT_DOC, tuple(getattr(doc, name) for name in _STORED_COLUMNS))
        db.execute(
            "INSERT INTO docs_fts (rowid, title, text, context) VALUES (?, ?, ?, ?)",
            (cursor.lastrowid, doc.title, doc.text, doc.context),
        )
    save_checkpoints(db, projector, todo)
    return len(todo)


def _add_context(db: sqlite3.Connection) -> None:
    """A file made before turns carried context: the column added (empty), the full-text index made
    again with it. Its turns have no context until the model is rebuilt (`eventloom rebuild keyword`)."""
    if any(row[1] == "context" for row in db.execute("PRAGMA table_info(docs)")):
        return
    db.execute("ALTER TABLE docs ADD COLUMN context TEXT NOT NULL DEFAULT ''")
    db.execute("DROP TABLE docs_fts")
    db.execute(_FTS)
    db.execute("INSERT INTO docs_fts(docs_fts) VALUES('rebuild')")


def _hit(row: tuple[Any, ...]) -> KeywordHit:
    doc = MemoryDoc(**dict(zip(_DOC_COLUMNS, row[: len(_DOC_COLUMNS)], strict=True)))
    cited = citation(doc.session, doc.seq, doc.event_hash)
    return KeywordHit(doc=doc, score=round(float(row[-1]), 6), citation=cited)
