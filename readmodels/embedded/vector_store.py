"""`SqliteVectorStore`: embeddings of memory documents in SQLite, searched by cosine similarity.

SQLite holds every vector with its document and its embedder's tag, in the same transaction as the
checkpoints, so a crash loses nothing acknowledged. Search runs in memory over the vectors of this store's
tag (loaded at `open`, extended after each commit) through a `VectorIndex`: HNSW candidates re-ranked
exactly, or an exact scan when the filters (session, time, kind) leave few documents. A store holds the
vectors of one embedder only: opening it with another (`EVENTLOOM_EMBEDDER` changed, say) raises
`VectorSpaceError`, which names both and says to run `eventloom rebuild vector` (a new generation,
re-embedded with the configured embedder); nothing is written into, or compared across, two spaces.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec
import numpy as np

from eventloom.event import citation
from readmodels.documents import DocKind, EventDocs, MemoryDoc, doc_identity
from readmodels.embedded.sqlite_db import (
    CHECKPOINTS_TABLE,
    SqliteDb,
    read_checkpoints,
    save_checkpoints,
    unapplied,
)
from readmodels.vector.embedders import Embedder, Vectors, VectorSpaceError, tag
from readmodels.vector.index import Mask, VectorIndex
from readmodels.vector.protocol import VectorHit, embedded_text

_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, tag TEXT NOT NULL, doc BLOB NOT NULL, "
    "vector BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vectors_tag ON vectors(tag)",
    CHECKPOINTS_TABLE,
)
QUERY_CACHE: Final = 64
_encode_doc = msgspec.msgpack.Encoder().encode
_decode_doc = msgspec.msgpack.Decoder(MemoryDoc).decode


class _Filters:
    """Per-row session, time and kind, as arrays, so a filter is a few vectorized comparisons."""

    def __init__(self) -> None:
        self.sessions = np.zeros(0, dtype=object)
        self.times = np.zeros(0, dtype=object)
        self.kinds = np.zeros(0, dtype=object)

    def add(self, docs: list[MemoryDoc]) -> None:
        self.sessions = np.concatenate([self.sessions, np.array([d.session for d in docs], dtype=object)])
        self.times = np.concatenate([self.times, np.array([d.ts for d in docs], dtype=object)])
        self.kinds = np.concatenate([self.kinds, np.array([d.kind for d in docs], dtype=object)])

    def mask(self, session: str | None, as_of: str | None, kinds: Sequence[str] | None) -> Mask | None:
        if session is None and as_of is None and not kinds:
            return None
        allowed = np.ones(len(self.sessions), dtype=bool)
        if session is not None:
            allowed &= self.sessions == session
        if as_of is not None:
            allowed &= self.times <= as_of
        if kinds:
            allowed &= np.isin(self.kinds, list(kinds))
        return allowed


class SqliteVectorStore:
    def __init__(self, path: str | Path, embedder: Embedder) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.tag = tag(embedder)
        self.foreign_vectors = 0
        self._db = SqliteDb(self.path, _SCHEMA)
        self._docs: list[MemoryDoc] = []
        self._row_of: dict[tuple[object, ...], int] = {}
        self._queries: dict[str, Vectors] = {}  # the last questions' embeddings (search, then scores)
        self._index = VectorIndex(embedder.dimensions)
        self._filters = _Filters()
        self._in_memory = asyncio.Lock()  # index, filters and documents change together, never mid-search

    async def open(self) -> None:
        await self._db.open()
        others = await self._db.read(self._other_tags)
        if others:
            raise VectorSpaceError(str(self.path), others, self.tag)
        docs, matrix, foreign = await self._db.read(self._load)
        self._docs, self.foreign_vectors, self._row_of = [], foreign, {}
        self._index = VectorIndex(self.embedder.dimensions)
        self._filters = _Filters()
        async with self._in_memory:
            await asyncio.to_thread(self._searchable, docs, matrix)

    def _searchable(self, docs: list[MemoryDoc], vectors: Vectors) -> None:
        self._index.add(vectors)
        self._filters.add(docs)
        for row, doc in enumerate(docs, start=len(self._docs)):
            self._row_of.setdefault(doc_identity(doc), row)
        self._docs.extend(docs)

    def _other_tags(self, db: sqlite3.Connection) -> list[str]:
        rows = db.execute("SELECT DISTINCT tag FROM vectors WHERE tag <> ? ORDER BY tag", (self.tag,))
        return [str(row[0]) for row in rows.fetchall()]

    def _load(self, db: sqlite3.Connection) -> tuple[list[MemoryDoc], Vectors, int]:
        rows = db.execute("SELECT doc, vector FROM vectors WHERE tag = ? ORDER BY id", (self.tag,)).fetchall()
        foreign = db.execute("SELECT count(*) FROM vectors WHERE tag <> ?", (self.tag,)).fetchone()[0]
        matrix = np.frombuffer(b"".join(vector for _, vector in rows), dtype=np.float32)
        return (
            [_decode_doc(doc) for doc, _ in rows],
            matrix.reshape(len(rows), self.embedder.dimensions),
            foreign,
        )

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqliteVectorStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._db.read(lambda db: read_checkpoints(db, projector, sessions))

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        if not batch:
            return 0
        applied, docs, vectors = await self._db.write(lambda db: self._apply(db, projector, batch))
        if docs:
            async with self._in_memory:  # committed: now searchable
                await asyncio.to_thread(self._searchable, docs, vectors)
        return applied

    def _apply(
        self, db: sqlite3.Connection, projector: str, batch: Sequence[EventDocs]
    ) -> tuple[int, list[MemoryDoc], Vectors]:
        todo = unapplied(db, projector, batch)
        docs = [doc for event in todo for doc in event.docs]
        vectors = self.embedder.embed([embedded_text(doc) for doc in docs]).astype(np.float32, copy=False)
        db.executemany(
            "INSERT INTO vectors (tag, doc, vector) VALUES (?, ?, ?)",
            [
                (self.tag, _encode_doc(doc), vector.tobytes())
                for doc, vector in zip(docs, vectors, strict=True)
            ],
        )
        save_checkpoints(db, projector, todo)
        return len(todo), docs, vectors

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[VectorHit]:
        """The `limit` documents most similar to `text` among those passing the filters (exact cosine)."""
        if limit <= 0 or not self._docs:
            return []
        query = await self._embedded(text)
        if not query.any():
            return []
        async with self._in_memory:
            allowed = self._filters.mask(session, as_of, kinds)
            found = await asyncio.to_thread(self._index.search, query, limit, allowed)
            return [self._hit(self._docs[row], score) for row, score in found]

    async def scores(self, text: str, docs: Sequence[MemoryDoc]) -> list[float | None]:
        """The cosine of each document's vector with the question's (None: no vector of it here)."""
        if not docs:
            return []
        query = await self._embedded(text)
        async with self._in_memory:
            rows = [self._row_of.get(doc_identity(doc)) for doc in docs]
            found = [row for row in rows if row is not None]
            if not query.any() or not found:
                return [None] * len(docs)
            scored = dict(zip(found, self._index.scores(query, found), strict=True))
        return [None if row is None else round(scored[row], 6) for row in rows]

    async def _embedded(self, text: str) -> Vectors:
        cached = self._queries.get(text)
        if cached is None:  # a model may take milliseconds: off the event loop
            cached = (await asyncio.to_thread(self.embedder.embed, [text]))[0]
            if len(self._queries) >= QUERY_CACHE:
                self._queries.pop(next(iter(self._queries)))
            self._queries[text] = cached
        return cached

    def _hit(self, doc: MemoryDoc, score: float) -> VectorHit:
        cited = citation(doc.session, doc.seq, doc.event_hash)
        return VectorHit(doc=doc, score=round(score, 6), citation=cited, tag=self.tag)
