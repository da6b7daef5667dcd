"""`SqliteVectorStore`: embeddings of memory documents in SQLite, searched by cosine similarity.

SQLite holds every vector with its document and its embedder's tag, in the same transaction as the
checkpoints, so a crash loses nothing acknowledged. A search takes its candidates in memory, from a
`VectorIndex` of this store's tag (loaded at `open`, extended after each commit: 8-bit rows and an
HNSW graph over them, or a scan when the filters (session, time, kind) leave few documents), then reads the
candidates' float32 vectors and the winners' documents from SQLite by id: the scores are exact, and
neither the documents nor the float32 vectors are held in memory. A store holds the
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
from readmodels.documents import DocKind, EventDocs, MemoryDoc, ScoreSpread
from readmodels.embedded.sqlite_db import (
    CHECKPOINTS_TABLE,
    SqliteDb,
    marks,
    read_checkpoints,
    save_checkpoints,
    unapplied,
)
from readmodels.embedded.vector_filters import RowFilters
from readmodels.embedded.vector_rows import RowLookup
from readmodels.vector.embedders import Embedder, Vectors, VectorSpaceError, tag
from readmodels.vector.index import Rows, VectorIndex, best
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


class SqliteVectorStore:
    def __init__(self, path: str | Path, embedder: Embedder) -> None:
        self.path = Path(path)
        self.embedder = embedder
        self.tag = tag(embedder)
        self.foreign_vectors = 0
        self._db = SqliteDb(self.path, _SCHEMA)
        self._ids = np.zeros(0, dtype=np.int64)  # each row's id in `vectors`, where its document is read
        self._row_of = RowLookup()
        self._queries: dict[str, Vectors] = {}  # the last questions' embeddings (search, then scores)
        self._index = VectorIndex(embedder.dimensions)
        self._filters = RowFilters()
        self._in_memory = asyncio.Lock()  # index, filters and documents change together, never mid-search

    async def open(self) -> None:
        await self._db.open()
        others = await self._db.read(self._other_tags)
        if others:
            raise VectorSpaceError(str(self.path), others, self.tag)
        ids, docs, matrix, foreign = await self._db.read(self._load)
        self.foreign_vectors, self._row_of = foreign, RowLookup()
        self._ids = np.zeros(0, dtype=np.int64)
        self._index = VectorIndex(self.embedder.dimensions)
        self._filters = RowFilters()
        async with self._in_memory:
            await asyncio.to_thread(self._searchable, ids, docs, matrix)

    def _searchable(self, ids: list[int], docs: list[MemoryDoc], vectors: Vectors) -> None:
        """Rows for committed documents; the documents themselves stay in SQLite (read for hits only)."""
        self._index.add(vectors)
        self._filters.add(docs)
        self._row_of.add(docs, first_row=len(self._ids))
        self._ids = np.concatenate([self._ids, np.array(ids, dtype=np.int64)])

    def _other_tags(self, db: sqlite3.Connection) -> list[str]:
        rows = db.execute("SELECT DISTINCT tag FROM vectors WHERE tag <> ? ORDER BY tag", (self.tag,))
        return [str(row[0]) for row in rows.fetchall()]

    def _load(self, db: sqlite3.Connection) -> tuple[list[int], list[MemoryDoc], Vectors, int]:
        rows = db.execute(
            "SELECT id, doc, vector FROM vectors WHERE tag = ? ORDER BY id", (self.tag,)
        ).fetchall()
        foreign = db.execute("SELECT count(*) FROM vectors WHERE tag <> ?", (self.tag,)).fetchone()[0]
        matrix = np.frombuffer(b"".join(vector for _, _, vector in rows), dtype=np.float32)
        return (
            [int(row_id) for row_id, _, _ in rows],
            [_decode_doc(doc) for _, doc, _ in rows],
            matrix.reshape(len(rows), self.embedder.dimensions),
            foreign,
        )

    def _read_docs(self, db: sqlite3.Connection, ids: list[int]) -> list[MemoryDoc]:
        found = db.execute(f"SELECT id, doc FROM vectors WHERE id IN ({marks(len(ids))})", ids)  # noqa: S608
        by_id = {int(row_id): _decode_doc(doc) for row_id, doc in found.fetchall()}
        return [by_id[row_id] for row_id in ids]

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
        applied, ids, docs, vectors = await self._db.write(lambda db: self._apply(db, projector, batch))
        if docs:
            async with self._in_memory:  # committed: now searchable
                await asyncio.to_thread(self._searchable, ids, docs, vectors)
        return applied

    def _apply(
        self, db: sqlite3.Connection, projector: str, batch: Sequence[EventDocs]
    ) -> tuple[int, list[int], list[MemoryDoc], Vectors]:
        todo = unapplied(db, projector, batch)
        last = db.execute("SELECT coalesce(max(id), 0) FROM vectors").fetchone()[0]
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
        # One writer, in this transaction: the ids past the last are these rows', in insertion order.
        ids = [int(row[0]) for row in db.execute("SELECT id FROM vectors WHERE id > ? ORDER BY id", (last,))]
        return len(todo), ids, docs, vectors

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
        if limit <= 0 or not len(self._index):
            return []
        query = await self._embedded(text)
        if not query.any():
            return []
        async with self._in_memory:
            allowed = self._filters.mask(session, as_of, kinds)
            rows = await asyncio.to_thread(self._index.candidates, query, limit, allowed)
            ids = self._ids[rows]
        if not len(rows):
            return []
        # rows are never rewritten: their vectors and documents are read outside the lock
        found = await self._db.read(lambda db: self._best(db, query, rows, ids, limit))
        return [self._hit(doc, score) for doc, score in found]

    def _best(
        self, db: sqlite3.Connection, query: Vectors, rows: Rows, ids: Rows, limit: int
    ) -> list[tuple[MemoryDoc, float]]:
        """The `limit` best candidates by the exact score of their stored vectors, with their documents."""
        ranked = best(query, rows, self._read_vectors(db, ids), limit)
        id_of = dict(zip(rows.tolist(), ids.tolist(), strict=True))
        docs = self._read_docs(db, [id_of[row] for row, _ in ranked])
        return [(doc, score) for doc, (_, score) in zip(docs, ranked, strict=True)]

    def _read_vectors(self, db: sqlite3.Connection, ids: Rows) -> Vectors:
        wanted = ids.tolist()
        found = db.execute(f"SELECT id, vector FROM vectors WHERE id IN ({marks(len(wanted))})", wanted)  # noqa: S608
        by_id = dict(found.fetchall())
        joined = b"".join(by_id[row_id] for row_id in wanted)
        return np.frombuffer(joined, dtype=np.float32).reshape(len(wanted), self.embedder.dimensions)

    async def spread(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
    ) -> ScoreSpread | None:
        """How the cosines spread over every document passing the filters (measured on a sample)."""
        if not len(self._index):
            return None
        query = await self._embedded(text)
        if not query.any():
            return None
        async with self._in_memory:
            allowed = self._filters.mask(session, as_of, kinds)
            documents, mean, std = await asyncio.to_thread(self._index.spread, query, allowed)
        return ScoreSpread(documents=documents, mean=mean, std=std) if documents else None

    async def scores(self, text: str, docs: Sequence[MemoryDoc]) -> list[float | None]:
        """The cosine of each document's vector with the question's (None: no vector of it here)."""
        if not docs:
            return []
        query = await self._embedded(text)
        async with self._in_memory:
            rows = self._row_of.rows(docs)
            ids = [None if row is None else int(self._ids[row]) for row in rows]
        known = np.array([row_id for row_id in ids if row_id is not None], dtype=np.int64)
        if not query.any() or not len(known):
            return [None] * len(docs)
        vectors = await self._db.read(lambda db: self._read_vectors(db, known))
        scored = dict(zip(known.tolist(), (float(score) for score in vectors @ query), strict=True))
        return [None if row_id is None else round(scored[row_id], 6) for row_id in ids]

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
