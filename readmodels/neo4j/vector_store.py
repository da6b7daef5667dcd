"""`Neo4jVectorStore`: the vector read model on Neo4j, cosine similarity over a vector index.

Documents are `VectorDoc` nodes in the graph's database (`readmodels.neo4j.docs`), each with its
embedder's `tag` and its `embedding` (none for a text without words: Neo4j refuses a zero vector), in the
cosine index `vector_doc_embedding`. Vectors of another tag are never compared; they are counted in
`foreign_vectors`.

Neo4j 5.26's `db.index.vector.queryNodes` finds the global top k and only then can a filter (tag,
session, time, kinds) drop some. So a search first counts the documents its filters leave: up to
`exact_scan_rows` of them are scanned exactly (`vector.similarity.cosine`, perfect recall); beyond that the
index is asked for `OVERSAMPLE x limit` candidates, oversampled again by the filter's selectivity, and
when fewer than `limit` survive the filter, the exact scan decides after all. Neo4j scores cosine as
(1 + cos) / 2; hits carry the cosine itself, from -1 to 1, like the embedded store's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Final

from eventloom.event import citation
from readmodels.documents import DocKind, EventDocs
from readmodels.graph.cypher.io import Row
from readmodels.neo4j.docs import DOC_MAP, ORDER_HITS, Neo4jDocs, as_doc, doc_filters, doc_rows
from readmodels.neo4j.driver import RETRY_TIME_S
from readmodels.neo4j.schema import DEFAULT_VECTOR_DIMENSIONS
from readmodels.vector.embedders import Embedder, tag
from readmodels.vector.index import MIN_CANDIDATES, OVERSAMPLE
from readmodels.vector.protocol import VectorHit, embedded_text

INDEX: Final = "vector_doc_embedding"
EXACT_SCAN_ROWS: Final = 5_000
"""Up to this many eligible documents, Neo4j scans them exactly in about the time the index takes."""
_ELIGIBLE: Final = "MATCH (d:VectorDoc) WHERE d.tag = $tag AND {filters} RETURN count(d) AS n"
_ALL: Final = "MATCH (d:VectorDoc) RETURN count(d) AS n"
_FOREIGN: Final = "MATCH (d:VectorDoc) WHERE d.tag <> $tag RETURN count(d) AS n"
_ZERO_SCORE: Final = 0.5
"""A document without a vector is orthogonal to every query: cosine 0, which Neo4j's scale puts at 0.5."""


def _exact(filters: str) -> str:
    return (
        f"MATCH (d:VectorDoc) WHERE d.tag = $tag AND {filters} "
        f"WITH d, CASE WHEN d.embedding IS NULL THEN {_ZERO_SCORE} "
        "ELSE vector.similarity.cosine(d.embedding, $vector) END AS score "
        f"RETURN {DOC_MAP} AS doc, score {ORDER_HITS} LIMIT $limit"
    )


def _approximate(filters: str) -> str:
    return (
        "CALL db.index.vector.queryNodes($index, $candidates, $vector) YIELD node AS d "
        f"WHERE d.tag = $tag AND {filters} WITH d, vector.similarity.cosine(d.embedding, $vector) AS score "
        f"RETURN {DOC_MAP} AS doc, score {ORDER_HITS} LIMIT $limit"
    )


class Neo4jVectorStore:
    """`VectorStore` for `embedder`'s vectors on the Neo4j database `database` at `uri`.

    `vector_dimensions` is the width of the database's vector index (the schema's, `EVENTLOOM_VECTOR_
    DIMENSIONS`); an embedder of another width still works, by exact scans only."""

    def __init__(
        self,
        uri: str,
        embedder: Embedder,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        vector_dimensions: int = DEFAULT_VECTOR_DIMENSIONS,
        exact_scan_rows: int = EXACT_SCAN_ROWS,
        connection_timeout_s: float = 5.0,
        retry_time_s: float = RETRY_TIME_S,
    ) -> None:
        self.embedder = embedder
        self.tag = tag(embedder)
        self.foreign_vectors = 0
        self.exact_scan_rows = exact_scan_rows
        self._indexed = embedder.dimensions == vector_dimensions  # the index skips vectors of other widths
        self._docs = Neo4jDocs(
            "vector",
            uri,
            user=user,
            password=password,
            database=database,
            vector_dimensions=vector_dimensions,
            connection_timeout_s=connection_timeout_s,
            retry_time_s=retry_time_s,
        )

    async def open(self) -> None:
        await self._docs.open()
        self.foreign_vectors = await self._count(_FOREIGN, {"tag": self.tag})

    async def close(self) -> None:
        await self._docs.close()

    async def __aenter__(self) -> Neo4jVectorStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def clear(self) -> None:
        """Delete every vector document (of any tag) and checkpoint, before a rebuild in place."""
        await self._docs.clear()
        self.foreign_vectors = 0

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._docs.applied_seqs(projector, sessions)

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        return await self._docs.apply(projector, batch, self._embedded_rows)

    async def _embedded_rows(self, events: list[EventDocs]) -> list[Row]:
        rows = doc_rows(events, key=f"{self.tag}|")  # a tag is a space: its documents are its own nodes
        if not rows:
            return rows
        texts = [embedded_text(doc) for event in events for doc in event.docs]
        vectors = await asyncio.to_thread(self.embedder.embed, texts)
        for row, vector in zip(rows, vectors, strict=True):
            row["props"]["tag"] = self.tag
            row["props"]["embedding"] = vector.tolist() if vector.any() else None
        return rows

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[VectorHit]:
        """The `limit` documents most similar to `text` among those passing the filters, best first."""
        if limit <= 0:
            return []
        query = (await asyncio.to_thread(self.embedder.embed, [text]))[0]
        if not query.any():
            return []
        filters, params = doc_filters(session, as_of, kinds)
        params |= {"tag": self.tag, "vector": query.tolist(), "limit": limit}
        eligible = await self._count(_ELIGIBLE.format(filters=filters), params)
        if not eligible:
            return []
        rows: list[Row] = []
        if self._indexed and eligible > self.exact_scan_rows:
            every = await self._count(_ALL, {})
            wanted = min(every, max(limit * OVERSAMPLE, MIN_CANDIDATES) * every // eligible)
            rows = await self._docs.rows(
                _approximate(filters), params | {"index": INDEX, "candidates": wanted}
            )
        if len(rows) < min(limit, eligible):  # the filter pruned the candidates (or no index was asked)
            rows = await self._docs.rows(_exact(filters), params)
        return [self._hit(row) for row in rows]

    async def _count(self, cypher: str, params: dict[str, Any]) -> int:
        return int((await self._docs.rows(cypher, params))[0]["n"])

    def _hit(self, row: Row) -> VectorHit:
        doc = as_doc(row["doc"])
        cosine = 2.0 * float(row["score"]) - 1.0
        return VectorHit(
            doc=doc,
            score=round(cosine, 6),
            citation=citation(doc.session, doc.seq, doc.event_hash),
            tag=self.tag,
        )
