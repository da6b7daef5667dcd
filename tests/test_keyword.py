"""The keyword read model: documents extracted from events, BM25 in SQLite FTS5, exactly once, rebuildable."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.generational import GenerationalProjector
from projectors.memory_docs import memory_docs
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from readmodels.documents import EventDocs, MemoryDoc
from readmodels.embedded import sqlite_db
from readmodels.embedded.keyword_store import SqliteKeywordStore, match_expression
from readmodels.keyword.common_words import MIN_DOCS, SHARE, CommonWords, Split
from tests.runtime_support import drained, running
from tests.test_graph_support import SessionLog, fact, ts

pytestmark = pytest.mark.anyio


def story() -> SessionLog:
    log = SessionLog("k1")
    log.add(
        "transcript.turn",
        {"role": "user", "speaker": "Maya", "text": "Our token refresh keeps failing at midnight"},
    )
    log.add(
        "document.indexed",
        {
            "path": "docs/auth.md",
            "title": "Auth",
            "content": "# Auth\n\nTokens are refreshed five minutes early.\n",
            "chunks": [{"text": "Tokens are refreshed five minutes early.", "line_start": 3, "line_end": 3}],
        },
    )
    log.add(
        "decision.made",
        {"decision_id": "d1", "title": "Refresh early", "rationale": "clock skew at midnight"},
    )
    log.add(
        "command.completed", {"command": "pytest tests/auth", "exit_code": 1, "output": "FAILED test_refresh"}
    )
    log.add("memory.fact.asserted", fact(("auth-service", "service", "Issues and refreshes OAuth tokens")))
    log.add("goal.created", {"goal_id": "g1", "title": "Ship login"})
    return log


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with SqliteKeywordStore(tmp_path / "keyword.sqlite") as opened:
        yield opened


def test_free_text_becomes_quoted_words_only() -> None:
    assert (
        match_expression('token NEAR("x" OR y) AND -z*')
        == '"token" OR "near" OR "x" OR "or" OR "y" OR "and" OR "z"'
    )
    assert match_expression("  ;; ") is None


@pytest.mark.parametrize(
    ("index", "expected"),
    [
        (0, {("turn", "Maya", None)}),  # the speaker has no summary: no document of its own
        (1, {("entity", "docs/auth.md", None), ("source", "docs/auth.md", 1), ("source", "docs/auth.md", 3)}),
        (2, {("entity", "d1", None), ("decision", "Refresh early", None)}),
        (3, {("command", "pytest tests/auth", None)}),
        (4, {("entity", "auth-service", None), ("event", "memory.fact.asserted", None)}),
        (5, {("entity", "g1", None), ("event", "goal.created", None)}),
    ],
)
def test_each_event_contributes_its_documents(index: int, expected: set[tuple[str, str, int | None]]) -> None:
    event = story().events[index]
    docs = memory_docs(event).docs
    assert {(doc.kind, doc.title, doc.line_start) for doc in docs} == expected
    assert all(
        (doc.session, doc.seq, doc.event_hash, doc.ts) == (event.session, event.seq, event.hash, event.ts)
        for doc in docs
    )


async def test_bm25_ranks_stems_and_cites(store: SqliteKeywordStore) -> None:
    log = story()
    assert await store.apply("keyword", [memory_docs(e) for e in log.events]) == len(log.events)
    hits = await store.search("why does refreshing fail at midnight")
    assert hits[0].doc.kind == "turn"  # "refresh", "fail" (stemmed) and "midnight": the most matches
    assert {hit.doc.kind for hit in hits} >= {"turn", "decision", "source", "entity"}
    assert all(hit.score > 0 for hit in hits) and hits == sorted(hits, key=lambda h: -h.score)
    assert hits[0].citation == f"eventloom://k1/events/1#{log.events[0].hash[:12]}"
    source = next(hit for hit in hits if hit.doc.kind == "source")
    assert (source.doc.path, source.doc.line_start, source.doc.line_end) == ("docs/auth.md", 3, 3)


async def test_filters_by_session_time_and_kind(store: SqliteKeywordStore) -> None:
    log = story()
    other = SessionLog("k2")
    other.add("transcript.turn", {"role": "user", "text": "refresh the dashboard"})
    await store.apply("keyword", [memory_docs(e) for e in log.events + other.events])
    assert {hit.doc.session for hit in await store.search("refresh")} == {"k1", "k2"}
    assert {hit.doc.session for hit in await store.search("refresh", session="k2")} == {"k2"}
    early = await store.search("refresh", session="k1", as_of=ts(2))
    assert {(hit.doc.seq, hit.doc.kind) for hit in early} == {(1, "turn"), (2, "source")}
    assert {hit.doc.kind for hit in await store.search("refresh", kinds=["decision"])} == {"decision"}
    assert await store.search("nothing-like-this") == []


async def test_each_event_is_indexed_once_and_a_failed_batch_writes_nothing(
    store: SqliteKeywordStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = story()
    batch = [memory_docs(e) for e in log.events]
    await store.apply("keyword", batch[:3])
    assert await store.apply("keyword", batch) == len(batch) - 3  # overlapping: only what is new
    assert await store.apply("keyword", batch) == 0
    assert len(await store.search("midnight", limit=50)) == 2
    assert await store.applied_seqs("keyword", ["k1", "k9"]) == {"k1": len(batch)}

    more = SessionLog("k3")
    more.add("transcript.turn", {"role": "user", "text": "midnight again"})
    monkeypatch.setattr(sqlite_db, "_UPSERT_CHECKPOINT", "INSERT INTO nowhere VALUES (?, ?, ?, ?)")
    with pytest.raises(Exception, match="nowhere"):
        await store.apply("keyword", [memory_docs(e) for e in more.events])
    assert len(await store.search("midnight", limit=50)) == 2  # the document was rolled back with it
    assert await store.applied_seqs("keyword", ["k3"]) == {}


async def test_the_keyword_projector_runs_and_rebuilds(log: EventLog, settings: Settings) -> None:
    requests = [
        AppendRequest(session="r1", type=e.type, actor="agent", payload=e.payload) for e in story().events
    ]
    await log.append_many(requests)
    projector = load_projector("keyword", settings)
    assert isinstance(projector, GenerationalProjector) and isinstance(projector.store, SqliteKeywordStore)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        live = await projector.store.search("midnight refresh")
        assert {hit.doc.kind for hit in live} >= {"turn", "decision"}
        report = await rebuild(log, "keyword")
        assert report.generation == 2 and report.events == len(requests)
    async with SqliteKeywordStore(
        settings.data_dir / "readmodels" / "keyword" / "gen-2" / "keyword.sqlite"
    ) as store:
        assert [(h.doc.seq, h.doc.kind, h.score) for h in await store.search("midnight refresh")] == [
            (h.doc.seq, h.doc.kind, h.score) for h in live
        ]


def note_doc(seq: int, text: str) -> EventDocs:
    """A one-document event (not a turn: a turn would borrow its neighbours' words as context)."""
    memory = MemoryDoc(
        session="c", seq=seq, event_hash=f"{seq:064x}", event_type="note.added", ts=ts(seq),
        kind="event", text=text,
    )  # fmt: skip
    return EventDocs(session="c", seq=seq, event_hash=memory.event_hash, docs=(memory,))


async def test_words_in_most_documents_are_left_out_of_the_match_but_rare_ones_rank(store: Any) -> None:
    doc = note_doc
    total = MIN_DOCS * 3
    batch = [
        doc(n, f"what we know about item {n}" + (" zebra" if n % 500 == 0 else ""))
        for n in range(1, total + 1)
    ]
    await store.apply("keyword", batch)
    hits = await store.search("what do we know about the zebra", limit=20)
    assert sorted(hit.doc.seq for hit in hits) == [500, 1000, 1500, 2000, 2500, 3000]
    only_common = await store.search("what about", limit=5)  # nothing rare: the rarest words still match
    assert len(only_common) == 5
    assert len(await store.search("item", limit=3)) == 3  # one word is never left out


def test_a_common_word_stays_left_out_when_a_few_more_documents_raise_the_threshold() -> None:
    """Counted against one threshold, a common word must not pass for rare against the next one up."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE docs_fts USING fts5(text, content='docs', content_rowid='id')")

    def add(first: int, last: int) -> None:
        rows = [(n, f"everywhere item{n}") for n in range(first, last + 1)]
        db.executemany("INSERT INTO docs (id, text) VALUES (?, ?)", rows)
        db.executemany("INSERT INTO docs_fts (rowid, text) VALUES (?, ?)", rows)

    size = 2 * MIN_DOCS / SHARE  # past the floor: the threshold grows with the index
    add(1, int(size))
    common = CommonWords()
    # in every document: weightless in BM25 (IDF <= 0), so neither matched on nor scored
    assert common.split(db, ["everywhere", "item7"]) == Split(["item7"], [])
    add(int(size) + 1, int(size) + 40)  # the half goes up by 20: still well within the cached counts
    assert common.split(db, ["everywhere", "item7"]) == Split(["item7"], [])


async def test_a_common_word_is_not_matched_on_but_scores_as_in_full_bm25(store: Any) -> None:
    """A document with the rare word and a common one outranks one with the rare word only."""
    total = MIN_DOCS * 3  # "often" in 40% of them: common (over 5% and 1,000), yet weighs in BM25

    def text(n: int) -> str:
        return " ".join(
            ("entry", "often" if n % 5 < 2 else "seldom", "zebra" if n % 100 in (0, 3) else "plain")
        )

    await store.apply("keyword", [note_doc(n, text(n)) for n in range(1, total + 1)])
    hits = await store.search("zebra often", limit=100)
    # every zebra document, and only those: a document with the common word only is not matched
    assert sorted(hit.doc.seq for hit in hits) == sorted(n for n in range(1, total + 1) if n % 100 in (0, 3))
    assert [hit.doc.text.split()[1] for hit in hits] == ["often"] * 30 + ["seldom"] * 30
    db = sqlite3.connect(store.path)
    statement = "SELECT rowid, -bm25(docs_fts, 2.0, 1.0) FROM docs_fts WHERE docs_fts MATCH ?"
    full = dict(db.execute(statement, ('"zebra" OR "often"',)).fetchall())  # BM25 with no cut at all
    db.close()
    assert [hit.score for hit in hits] == [round(full[hit.doc.seq], 6) for hit in hits]  # rowid = seq here
    assert hits[0].score > hits[-1].score
    best = await store.search("zebra often", limit=3)
    assert [hit.doc.seq for hit in best] == [hit.doc.seq for hit in hits[:3]]


def test_when_every_word_is_common_the_rarest_are_matched_on_and_the_others_scored() -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE docs (id INTEGER PRIMARY KEY, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE docs_fts USING fts5(text, content='docs', content_rowid='id')")
    total = MIN_DOCS * 3

    def text(n: int) -> str:  # "aa" in 1,100 documents, "bb" in 1,200, "cc" in 1,300, "all" in all
        return " ".join(word for word, share in (("aa", 11), ("bb", 12), ("cc", 13)) if n % 30 < share)

    rows = [(n, f"all {text(n)}") for n in range(1, total + 1)]
    db.executemany("INSERT INTO docs (id, text) VALUES (?, ?)", rows)
    db.executemany("INSERT INTO docs_fts (rowid, text) VALUES (?, ?)", rows)
    common = CommonWords()
    assert common.split(db, ["cc", "all", "bb", "aa"]) == Split(["aa", "bb"], ["cc"])
    assert common.split(db, ["cc", "zz", "all"]) == Split(["zz"], ["cc"])


async def test_the_spread_of_bm25_counts_every_document_in_scope_unmatched_ones_as_zero(
    store: SqliteKeywordStore,
) -> None:
    log = story()
    other = SessionLog("k2")
    other.add("transcript.turn", {"role": "user", "text": "refresh the dashboard"})
    await store.apply("keyword", [memory_docs(e) for e in log.events + other.events])
    scores = [hit.score for hit in await store.search("refresh midnight", session="k1", limit=100)]
    in_scope = sum(len(memory_docs(e).docs) for e in log.events)
    spread = await store.spread("refresh midnight", session="k1")
    assert spread is not None and spread.documents == in_scope > len(scores)
    mean = sum(scores) / in_scope
    assert spread.mean == pytest.approx(mean, rel=1e-4)
    assert spread.std == pytest.approx((sum(s * s for s in scores) / in_scope - mean * mean) ** 0.5, rel=1e-4)
    assert spread.z(max(scores)) > 1.0
    nothing = await store.spread("nothing-like-this", session="k1")
    assert nothing is not None and (nothing.mean, nothing.std) == (0.0, 0.0)
    assert await store.spread("refresh", session="no-such-session") is None
