"""`Neo4jKeywordStore`: the keyword read model on Neo4j, a full-text (Lucene) index ranked with BM25.

Documents are `KeywordDoc` nodes in the graph's database (`readmodels.neo4j.docs`), indexed by
`keyword_doc_fulltext` over title, text and a turn's borrowed context (`readmodels.keyword.context`, filled
from the turns before it, read in one query before the batch is written) with the `english` analyzer
(Porter stemming, as in the embedded FTS5 model). Free text becomes a Lucene query of quoted words only,
each searched in the title (boosted by `TITLE_WEIGHT`), in the text and in the context (`CONTEXT_WEIGHT`),
any of them matching: no Lucene syntax from the caller gets through.
The index returns every match, best first, and the filters apply to those, so a filter never loses recall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from eventloom.event import citation
from readmodels.documents import DocKind, EventDocs
from readmodels.graph.cypher.io import Row
from readmodels.keyword.context import CONTEXT_TURNS, with_context
from readmodels.keyword.protocol import CONTEXT_WEIGHT, MAX_QUERY_WORDS, TITLE_WEIGHT, KeywordHit
from readmodels.neo4j.docs import DOC_MAP, ORDER_HITS, Neo4jDocs, as_doc, doc_filters, doc_rows
from readmodels.neo4j.driver import RETRY_TIME_S
from readmodels.neo4j.schema import DEFAULT_VECTOR_DIMENSIONS

INDEX: Final = "keyword_doc_fulltext"
_WORD: Final = re.compile(r"\w+", re.UNICODE)


OVERSAMPLE: Final = 20
MIN_CANDIDATES: Final = 200


def _search(filters: str, *, capped: bool) -> str:
    """Lucene's best `$candidates` (when capped: it stops early instead of scoring every match), filtered."""
    options = ", {limit: $candidates}" if capped else ""
    return (
        f"CALL db.index.fulltext.queryNodes($index, $query{options}) YIELD node AS d, score WHERE {filters} "
        f"RETURN {DOC_MAP} AS doc, score {ORDER_HITS} LIMIT $limit"
    )


def _quoted(word: str) -> str:
    # `\w+` words hold neither quotes nor backslashes; escaping them anyway keeps this safe on its own.
    return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lucene_query(text: str) -> str | None:
    """The Lucene query for free text: each word quoted, in the title (boosted) or the text, any matching."""
    words = list(dict.fromkeys(word.lower() for word in _WORD.findall(text)))[:MAX_QUERY_WORDS]
    clauses = [
        f"title:{q}^{TITLE_WEIGHT} OR text:{q} OR context:{q}^{CONTEXT_WEIGHT}"
        for q in (_quoted(word) for word in words)
    ]
    return " OR ".join(clauses) or None


_EARLIER_TURNS: Final = (  # by keyword_doc_session_seq
    "UNWIND $sessions AS s CALL (s) { MATCH (d:KeywordDoc) WHERE d.session = s.session AND d.seq < s.seq "
    "AND d.kind = 'turn' RETURN d ORDER BY d.seq DESC, d.ord DESC LIMIT $turns } "
    "RETURN s.session AS session, d.seq AS seq, d.ord AS ord, d.text AS text"
)


class Neo4jKeywordStore:
    """`KeywordStore` on the Neo4j database `database` at `uri` (the graph's, when configured so)."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        vector_dimensions: int = DEFAULT_VECTOR_DIMENSIONS,
        connection_timeout_s: float = 5.0,
        retry_time_s: float = RETRY_TIME_S,
    ) -> None:
        self._docs = Neo4jDocs(
            "keyword",
            uri,
            user=user,
            password=password,
            database=database,
            vector_dimensions=vector_dimensions,  # only for the shared schema's vector indexes
            connection_timeout_s=connection_timeout_s,
            retry_time_s=retry_time_s,
        )

    async def open(self) -> None:
        await self._docs.open()

    async def close(self) -> None:
        await self._docs.close()

    async def __aenter__(self) -> Neo4jKeywordStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def clear(self) -> None:
        """Delete every keyword document and checkpoint (a rebuild in place replays the log after)."""
        await self._docs.clear()

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._docs.applied_seqs(projector, sessions)

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        return await self._docs.apply(projector, batch, self._doc_rows)

    async def _doc_rows(self, events: list[EventDocs]) -> list[Row]:
        """The rows of `events`, their turns' context filled (the earlier turns read in one query)."""
        first: dict[str, int] = {}
        for event in events:
            if any(doc.kind == "turn" for doc in event.docs):
                first.setdefault(event.session, event.seq)
        earlier: dict[str, list[tuple[int, int, str]]] = {session: [] for session in first}
        if first:
            sessions = [{"session": session, "seq": seq} for session, seq in first.items()]
            for row in await self._docs.rows(_EARLIER_TURNS, {"sessions": sessions, "turns": CONTEXT_TURNS}):
                earlier[str(row["session"])].append((int(row["seq"]), int(row["ord"]), str(row["text"])))

        def stored(session: str, seq: int) -> list[str]:
            # the batch's first turn of a session is the only one that asks, with the seq read for it
            return [text for _, _, text in sorted(earlier.get(session, []), reverse=True)]

        return doc_rows(with_context(events, stored))

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        query = lucene_query(text)
        if query is None or limit <= 0:
            return []
        filters, filter_params = doc_filters(session, as_of, kinds)
        params = {**filter_params, "index": INDEX, "query": query, "limit": limit}
        candidates = max(MIN_CANDIDATES, OVERSAMPLE * limit)
        rows = await self._docs.rows(_search(filters, capped=True), {**params, "candidates": candidates})
        if len(rows) < limit and filter_params:
            # the filters kept too few of the best candidates: score every match, for full recall
            rows = await self._docs.rows(_search(filters, capped=False), params)
        return [_hit(row) for row in rows]


def _hit(row: Row) -> KeywordHit:
    doc = as_doc(row["doc"])
    cited = citation(doc.session, doc.seq, doc.event_hash)
    return KeywordHit(doc=doc, score=round(float(row["score"]), 6), citation=cited)
