"""The keyword and vector read models on both backends: SQLite (embedded) and Neo4j (a real server).

One contract, run on each backend: the same documents, filters, citations, exactly-once application,
hostile query text, title boost, vector-space isolation and recall under filters; then the backends
against each other. Neo4j community has one database, so each Neo4j store starts from its model cleared:
tests run one at a time. The projectors on Neo4j are in tests/test_memory_doc_neo4j.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from projectors.memory_docs import memory_docs
from readmodels.documents import EventDocs, MemoryDoc
from readmodels.embedded import sqlite_db
from readmodels.embedded.keyword_store import SqliteKeywordStore
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.keyword.protocol import KeywordStore
from readmodels.neo4j import docs as neo4j_docs
from readmodels.neo4j import vector_store as neo4j_store_module
from readmodels.neo4j.keyword_store import Neo4jKeywordStore, lucene_query
from readmodels.neo4j.vector_store import Neo4jVectorStore
from readmodels.vector.embedders import Embedder, HashEmbedder, VectorSpaceError
from readmodels.vector.protocol import VectorStore, embedded_text
from tests.test_graph_support import SessionLog, ts
from tests.test_keyword import story

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio
Opener = Callable[..., AbstractAsyncContextManager[Any]]
HOSTILE = (
    'title:x OR y~ AND (z* "',
    "midnight) OR (*:*",
    'text:"midnight"^100 -refresh',
    "NOT midnight AND OR",
    '\\"midnight\\" [a TO z] {b TO c} /re.*/ && || !',
)


def _endpoint(request: pytest.FixtureRequest) -> Neo4jEndpoint:
    endpoint: Neo4jEndpoint = request.getfixturevalue("neo4j_endpoint")  # skips when none can be had
    return endpoint


def keyword_on(endpoint: Neo4jEndpoint) -> Neo4jKeywordStore:
    return Neo4jKeywordStore(endpoint.uri, user=endpoint.user, password=endpoint.password)


def vector_on(
    endpoint: Neo4jEndpoint, embedder: Embedder | None = None, exact_scan_rows: int = 5_000
) -> Neo4jVectorStore:
    return Neo4jVectorStore(
        endpoint.uri,
        embedder or HashEmbedder(),
        user=endpoint.user,
        password=endpoint.password,
        exact_scan_rows=exact_scan_rows,
    )


@pytest.fixture(params=["sqlite", "neo4j"])
def open_keyword(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a keyword store of the backend, starting empty (the Neo4j one cleared)."""
    endpoint = _endpoint(request) if request.param == "neo4j" else None
    cleared: list[bool] = []

    @asynccontextmanager
    async def opened() -> AsyncIterator[SqliteKeywordStore | Neo4jKeywordStore]:
        if endpoint is None:
            async with SqliteKeywordStore(tmp_path / "keyword.sqlite") as store:
                yield store
            return
        async with keyword_on(endpoint) as fresh:
            if not cleared:
                await fresh.clear()
                cleared.append(True)
            yield fresh

    return opened


@pytest.fixture(params=["sqlite", "neo4j", "neo4j-index"])
def open_vector(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a vector store of the backend for an embedder; "neo4j-index" always asks the vector index
    first (no exact scan up front), so its fallback to the exact scan is exercised too."""
    endpoint = _endpoint(request) if request.param != "sqlite" else None
    exact_scan_rows = 0 if request.param == "neo4j-index" else 5_000
    cleared: list[bool] = []

    @asynccontextmanager
    async def opened(embedder: Embedder | None = None) -> AsyncIterator[SqliteVectorStore | Neo4jVectorStore]:
        embedder = embedder or HashEmbedder()
        if endpoint is None:
            async with SqliteVectorStore(tmp_path / "vector.sqlite", embedder) as store:
                yield store
            return
        async with vector_on(endpoint, embedder, exact_scan_rows) as fresh:
            if not cleared:
                await fresh.clear()
                cleared.append(True)
            yield fresh

    return opened


def batch_of(*logs: SessionLog) -> list[EventDocs]:
    return [memory_docs(event) for log in logs for event in log.events]


def other_session() -> SessionLog:
    other = SessionLog("k2")
    other.add("transcript.turn", {"role": "user", "text": "refresh the dashboard"})
    return other


# -- keyword --------------------------------------------------------------------------------------------


async def test_keyword_filters_and_citations(open_keyword: Opener) -> None:
    log = story()
    async with open_keyword() as store:
        assert isinstance(store, KeywordStore)
        assert await store.apply("keyword", batch_of(log, other_session())) == len(log.events) + 1
        hits = await store.search("refresh")
        assert {hit.doc.session for hit in hits} == {"k1", "k2"}
        assert all(
            h.citation == f"eventloom://{h.doc.session}/events/{h.doc.seq}#{h.doc.event_hash[:12]}"
            for h in hits
        )
        assert {hit.doc.session for hit in await store.search("refresh", session="k2")} == {"k2"}
        early = await store.search("refresh", session="k1", as_of=ts(2))
        assert {(hit.doc.seq, hit.doc.kind) for hit in early} == {(1, "turn"), (2, "source")}
        assert {hit.doc.kind for hit in await store.search("refresh", kinds=["decision"])} == {"decision"}
        assert len(await store.search("refresh", limit=2)) == 2
        assert await store.search("refresh", limit=0) == []
        assert await store.search("nothing-like-this") == []
        sources = [hit.doc for hit in await store.search("five minutes") if hit.doc.kind == "source"]
        assert sorted(sources, key=lambda doc: doc.line_start or 0) == [
            doc for doc in batch_of(log)[1].docs if doc.kind == "source"
        ]  # every field back as it went in: path, line range, text


async def test_keyword_applies_each_event_once_and_a_failed_batch_writes_nothing(
    open_keyword: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = batch_of(story())
    async with open_keyword() as store:
        assert await store.apply("keyword", batch[:3]) == 3
        assert await store.apply("keyword", batch) == len(batch) - 3  # overlapping: only what is new
        assert await store.apply("keyword", batch) == 0
        assert await store.apply("keyword", []) == 0
        assert len(await store.search("midnight", limit=50)) == 2
        assert await store.applied_seqs("keyword", ["k1", "k9"]) == {"k1": len(batch)}
        assert await store.applied_seqs("other", ["k1"]) == {}

        more = SessionLog("k3")
        more.add("transcript.turn", {"role": "user", "text": "midnight again"})
        monkeypatch.setattr(sqlite_db, "_UPSERT_CHECKPOINT", "INSERT INTO nowhere VALUES (?, ?, ?, ?)")
        monkeypatch.setattr(neo4j_docs, "_SAVE_CHECKPOINTS", "CALL nowhere.to_be_found()")
        with pytest.raises(Exception, match="nowhere"):
            await store.apply("keyword", batch_of(more))
        assert len(await store.search("midnight", limit=50)) == 2  # the document was rolled back with it
        assert await store.applied_seqs("keyword", ["k3"]) == {}


def test_free_text_becomes_quoted_lucene_words_only() -> None:
    assert lucene_query('title:x OR y~ AND (z* "') == " OR ".join(
        f'title:"{w}"^2.0 OR text:"{w}" OR context:"{w}"^0.5' for w in ("title", "x", "or", "y", "and", "z")
    )
    assert lucene_query("*:* ;; ~") is None


async def test_hostile_query_text_searches_its_words_only(open_keyword: Opener) -> None:
    async with open_keyword() as store:
        await store.apply("keyword", batch_of(story()))
        for text in HOSTILE:
            words = " ".join(re.findall(r"\w+", text))
            assert await store.search(text, limit=50) == await store.search(words, limit=50), text
        assert [h.doc.kind for h in await store.search(HOSTILE[1])] == [
            h.doc.kind for h in await store.search("midnight")
        ]  # "or" is a word like any other: no document here has it
        assert await store.search("*:*") == [] and await store.search('"') == []


async def test_a_title_match_weighs_more_than_a_body_match(open_keyword: Opener) -> None:
    def doc(seq: int, title: str, text: str) -> EventDocs:
        made = MemoryDoc(
            session="t1", seq=seq, event_hash=f"{seq:064x}", event_type="note.added", ts=ts(seq),
            kind="event", title=title, text=text,
        )  # fmt: skip
        return EventDocs(session="t1", seq=seq, event_hash=made.event_hash, docs=(made,))

    async with open_keyword() as store:
        others = [doc(seq, "quartz", "basalt") for seq in range(3, 9)]  # so that "zephyr" is a rare word
        await store.apply("keyword", [doc(1, "quartz", "zephyr"), doc(2, "zephyr", "quartz"), *others])
        body, title = sorted(await store.search("zephyr"), key=lambda hit: hit.doc.seq)
        assert title.score > body.score
        assert [hit.doc.seq for hit in await store.search("zephyr")] == [2, 1]


async def test_a_session_with_few_matches_among_many_still_finds_them_all(open_keyword: Opener) -> None:
    def doc(session: str, seq: int, text: str) -> EventDocs:
        made = MemoryDoc(
            session=session, seq=seq, event_hash=f"{seq:064x}", event_type="note.added", ts=ts(seq),
            kind="event", title="", text=text,
        )  # fmt: skip
        return EventDocs(session=session, seq=seq, event_hash=made.event_hash, docs=(made,))

    async with open_keyword() as store:
        # more matches elsewhere than Neo4j's capped first pass reads (readmodels/neo4j/keyword_store.py)
        crowd = [doc("crowd", seq, "alpha alpha alpha beta") for seq in range(1, 451)]
        await store.apply("keyword", [*crowd, doc("few", 1, "alpha gamma"), doc("few", 2, "alpha delta")])
        assert sorted(hit.doc.seq for hit in await store.search("alpha", session="few", limit=10)) == [1, 2]
        assert len(await store.search("alpha", session="few", limit=1)) == 1
        assert len(await store.search("alpha", limit=10)) == 10


# -- vector ---------------------------------------------------------------------------------------------


async def test_vector_search_is_exact_cosine_over_the_filtered_documents(open_vector: Opener) -> None:
    events = story().events
    async with open_vector() as store:
        assert isinstance(store, VectorStore)
        assert await store.apply("vector", batch_of(story(), other_session())) == len(events) + 1
        question = "token refresh keeps failing at midnight"
        hits = await store.search(question, session="k1", limit=3)
        document, query = HashEmbedder().embed([embedded_text(hits[0].doc), question])
        assert hits[0].doc.kind == "turn"
        assert hits[0].score == pytest.approx(float(document @ query), abs=1e-5)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert hits[0].citation.startswith("eventloom://k1/events/1#") and hits[0].tag == "hash@1/384"
        assert await store.search("midnight", session="nobody") == []
        assert {h.doc.session for h in await store.search("refresh dashboard", session="k2")} == {"k2"}
        assert {h.doc.seq for h in await store.search("midnight refresh", as_of=ts(2), limit=50)} <= {1, 2}
        decisions = await store.search("midnight", kinds=["decision"], limit=50)
        assert {h.doc.kind for h in decisions} == {"decision"}
        assert len(await store.search("refresh", limit=50)) == sum(len(b.docs) for b in batch_of(story())) + 1
        assert await store.search("", limit=5) == [] and await store.search("refresh", limit=0) == []


async def test_vectors_apply_once_and_other_spaces_are_never_compared(open_vector: Opener) -> None:
    batch = batch_of(story())
    docs = sum(len(event.docs) for event in batch)
    async with open_vector() as store:
        assert await store.apply("vector", batch[:2]) == 2
        assert await store.apply("vector", batch) == len(batch) - 2
        assert await store.apply("vector", batch) == 0
        assert await store.applied_seqs("vector", ["k1", "k9"]) == {"k1": len(batch)}
        before = await store.search("tokens refresh early", limit=20)
    async with open_vector() as reopened:
        assert await reopened.search("tokens refresh early", limit=20) == before
        assert reopened.foreign_vectors == 0
    if isinstance(reopened, SqliteVectorStore):  # a generation is one vector space: another is refused
        with pytest.raises(VectorSpaceError, match=r"hash@1/384.*hash@1/64"):
            async with open_vector(HashEmbedder(64)):
                pass
        return
    # Neo4j rebuilds in place, so one database holds both spaces for a while: never compared
    async with open_vector(HashEmbedder(64)) as narrow:
        assert narrow.foreign_vectors == docs
        assert await narrow.search("tokens refresh early") == []  # 384-wide vectors are not its own
        assert await narrow.apply("vector-64", batch) == len(batch)
        hits = await narrow.search("tokens refresh early", limit=50)
        assert len(hits) == docs and {hit.tag for hit in hits} == {"hash@1/64"}
    async with open_vector() as wide:
        assert wide.foreign_vectors == docs
        assert await wide.search("tokens refresh early", limit=20) == before


async def test_a_selective_filter_keeps_full_recall(
    open_vector: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The filter keeps documents far from the query: few or none are among the index's candidates."""

    def note(session: str, seq: int, text: str) -> EventDocs:
        made = MemoryDoc(
            session=session, seq=seq, event_hash=f"{seq:064x}", event_type="note.added", ts=ts(seq),
            kind="event", text=text,
        )  # fmt: skip
        return EventDocs(session=session, seq=seq, event_hash=made.event_hash, docs=(made,))

    question = "alpha beta gamma"
    near = [note("near", seq, f"alpha beta gamma {seq}") for seq in range(1, 1001)]
    far = [note("far", seq, f"alpha {' '.join(['delta'] * (seq % 9))} {seq}") for seq in range(1, 201)]
    query, *vectors = HashEmbedder().embed([question, *(event.docs[0].text for event in far)])
    best = sorted((float(vector @ query) for vector in vectors), reverse=True)[:3]
    async with open_vector() as store:
        await store.apply("vector", near + far)
        hits = await store.search(question, session="far", limit=3)
        assert {hit.doc.session for hit in hits} == {"far"}
        assert [hit.score for hit in hits] == pytest.approx(best, abs=1e-5)
        if isinstance(store, Neo4jVectorStore) and store.exact_scan_rows == 0:
            statements: list[str] = []
            read = store._docs.rows

            async def spied(cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
                statements.append(cypher)
                return await read(cypher, params)

            monkeypatch.setattr(store._docs, "rows", spied)
            monkeypatch.setattr(neo4j_store_module, "OVERSAMPLE", 1)
            monkeypatch.setattr(neo4j_store_module, "MIN_CANDIDATES", 1)  # 18 candidates: all near
            assert await store.search(question, session="far", limit=3) == hits
            assert ["queryNodes" in s for s in statements] == [False, False, True, False]  # then exact


# -- the backends against each other ------------------------------------------------------------------


async def test_the_backends_agree_on_the_top_hits(neo4j_endpoint: Neo4jEndpoint, tmp_path: Path) -> None:
    batch = batch_of(story(), other_session())
    async with (
        SqliteKeywordStore(tmp_path / "k.sqlite") as sqlite_keyword,
        keyword_on(neo4j_endpoint) as neo4j_keyword,
        SqliteVectorStore(tmp_path / "v.sqlite", HashEmbedder()) as sqlite_vector,
        vector_on(neo4j_endpoint) as neo4j_vector,
    ):
        await neo4j_keyword.clear()
        await neo4j_vector.clear()
        stores: tuple[KeywordStore | VectorStore, ...] = (
            sqlite_keyword,
            neo4j_keyword,
            sqlite_vector,
            neo4j_vector,
        )
        for store in stores:
            await store.apply("docs", batch)
        # Lucene's BM25 scores each field on its own and adds the scores up (FTS5 adds up the weighted
        # counts first): the best hit agrees, the rest of the order may differ
        for text in ("pytest failed", "clock skew", "OAuth tokens", "ship login", "Maya", "refresh early"):
            (embedded, *_) = await sqlite_keyword.search(text, limit=1)
            assert [hit.doc for hit in await neo4j_keyword.search(text, limit=1)] == [embedded.doc], text
        for text in ("token refresh keeps failing at midnight", "tokens refreshed early", "pytest", "login"):
            expected = [h for h in await sqlite_vector.search(text, limit=5) if h.score > 1e-6]
            found = [h for h in await neo4j_vector.search(text, limit=5) if h.score > 1e-6]
            assert [h.doc for h in found] == [h.doc for h in expected], text
            assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-5)
