"""Turns that carry their context: the keyword model indexes a short turn with words of the turns before it
(readmodels/keyword/context.py), on SQLite and on Neo4j; the vector model never embeds them."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from projectors.memory_docs import memory_docs
from readmodels.documents import EventDocs, MemoryDoc
from readmodels.embedded.keyword_store import SqliteKeywordStore
from readmodels.keyword.context import CONTEXT_TURNS, CONTEXT_WORDS, borrowed_context, with_context
from readmodels.neo4j.driver import auto_commit
from readmodels.neo4j.keyword_store import Neo4jKeywordStore
from readmodels.vector.embedders import HashEmbedder
from readmodels.vector.protocol import embedded_text
from tests.test_graph_support import SessionLog
from tests.test_memory_doc_backends import Opener, batch_of, keyword_on, open_keyword, open_vector

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

__all__ = ["open_keyword", "open_vector"]  # the backends' fixtures, used here too
pytestmark = pytest.mark.anyio

LONG = " ".join(f"w{n}" for n in range(70))
"""A turn of more than `CONTEXT_WORDS` words, none of them a word another turn holds."""


def words(count: int, prefix: str) -> str:
    return " ".join(f"{prefix}{n}" for n in range(count))


def conversation() -> tuple[SessionLog, SessionLog]:
    c1, c2 = SessionLog("c1"), SessionLog("c2")
    c1.add(
        "transcript.turn",
        {"role": "user", "speaker": "Ana", "text": "Did you finally adopt the greyhound from the shelter?"},
    )
    c1.add("transcript.turn", {"role": "user", "speaker": "Bo", "text": "yes, last Tuesday"})
    c1.add("transcript.turn", {"role": "user", "speaker": "Ana", "text": LONG})
    c1.add("transcript.turn", {"role": "user", "speaker": "Bo", "text": "and the quokka too"})
    c2.add("transcript.turn", {"role": "user", "speaker": "Cy", "text": "the marmot came late"})
    c2.add("transcript.turn", {"role": "user", "speaker": "Di", "text": "ok"})
    return c1, c2


def interleaved() -> list[EventDocs]:
    c1, c2 = conversation()
    first, second = batch_of(c1), batch_of(c2)
    return [first[0], second[0], first[1], second[1], first[2], first[3]]


async def stored_contexts(store: Any) -> dict[tuple[str, int], str]:
    if isinstance(store, SqliteKeywordStore):
        rows = await store._db.read(
            lambda db: db.execute("SELECT session, seq, context FROM docs WHERE kind = 'turn'").fetchall()
        )
        return {(str(session), int(seq)): str(context) for session, seq, context in rows}
    assert isinstance(store, Neo4jKeywordStore)
    rows = await store._docs.rows(
        "MATCH (d:KeywordDoc {kind: 'turn'}) RETURN d.session AS session, d.seq AS seq, d.context AS context",
        {},
    )
    return {(str(row["session"]), int(row["seq"])): str(row["context"] or "") for row in rows}


def expected_contexts(batch: list[EventDocs]) -> dict[tuple[str, int], str]:
    return {
        (doc.session, doc.seq): doc.context
        for event in with_context(batch, lambda session, seq: [])
        for doc in event.docs
        if doc.kind == "turn"
    }


# -- the pure rule ------------------------------------------------------------------------------------


def test_a_turn_borrows_the_last_words_of_the_turns_before_it_up_to_the_limit() -> None:
    assert CONTEXT_WORDS == 64
    own = words(20, "own")
    earlier = [words(30, "c"), words(10, "b"), words(30, "a")]  # newest first
    borrowed = borrowed_context(own, earlier).split()
    assert len(borrowed) == 44  # 64 in all
    assert borrowed == [*words(30, "a").split()[-4:], *words(10, "b").split(), *words(30, "c").split()]
    assert borrowed_context(words(64, "own"), earlier) == ""
    assert borrowed_context(LONG, earlier) == ""
    assert borrowed_context("yes", []) == ""
    assert borrowed_context("yes", ["", "one  two\nthree"]) == "one two three"


def test_context_is_causal_and_per_session() -> None:
    filled = {
        (doc.session, doc.seq): doc.context
        for event in with_context(interleaved(), lambda session, seq: [])
        for doc in event.docs
    }
    assert filled[("c1", 1)] == "" and filled[("c2", 1)] == ""
    assert filled[("c1", 2)] == "Did you finally adopt the greyhound from the shelter?"
    assert filled[("c1", 3)] == ""  # a long turn borrows nothing
    assert filled[("c1", 4)] == " ".join(LONG.split()[-(CONTEXT_WORDS - 4) :])  # stops at the long turn
    assert filled[("c2", 2)] == "the marmot came late"


def test_the_stored_turns_are_asked_once_per_session_and_only_when_words_are_wanted() -> None:
    asked: list[tuple[str, int]] = []

    def stored(session: str, seq: int) -> list[str]:
        asked.append((session, seq))
        return ["older words"]

    c1, c2 = conversation()
    filled = with_context(batch_of(c1)[2:] + batch_of(c2)[1:], stored)
    assert asked == [("c2", 2)]  # c1's first turn here is long: what it gives is all a later one borrows
    assert [doc.context for event in filled for doc in event.docs] == [
        "",
        " ".join(LONG.split()[-60:]),
        "older words",
    ]


def test_only_turns_carry_context() -> None:
    log = SessionLog("k")
    log.add("transcript.turn", {"role": "user", "speaker": "Ana", "text": "the deploy failed"})
    log.add("decision.made", {"decision_id": "d1", "title": "Roll back", "rationale": "it failed"})
    log.add("command.completed", {"command": "make deploy", "exit_code": 1, "output": "boom"})
    filled = with_context(batch_of(log), lambda session, seq: ["stored turn"])
    assert [(doc.kind, doc.context) for event in filled for doc in event.docs if doc.kind != "entity"] == [
        ("turn", "stored turn"),
        ("decision", ""),
        ("command", ""),
    ]


# -- the keyword stores -------------------------------------------------------------------------------


async def test_a_short_turn_is_found_by_a_word_only_its_previous_turn_holds(open_keyword: Opener) -> None:
    async with open_keyword() as store:
        await store.apply("keyword", interleaved())
        greyhound = await store.search("greyhound", limit=10)
        assert [(hit.doc.session, hit.doc.seq) for hit in greyhound] == [
            ("c1", 1),
            ("c1", 2),
        ]  # own text first
        assert greyhound[1].doc.text == "yes, last Tuesday" and greyhound[1].doc.context == ""  # never shown
        # a long turn borrows nothing; no turn borrows from a later one or from another session
        assert [(h.doc.session, h.doc.seq) for h in await store.search("quokka", limit=10)] == [("c1", 4)]
        marmot = await store.search("marmot", limit=10)
        assert [(hit.doc.session, hit.doc.seq) for hit in marmot] == [("c2", 1), ("c2", 2)]
        assert {(h.doc.session, h.doc.seq) for h in await store.search("w69", limit=10)} == {
            ("c1", 3),
            ("c1", 4),
        }
        as_of = await store.search("greyhound", as_of=interleaved()[0].docs[0].ts, limit=10)
        assert [(hit.doc.session, hit.doc.seq) for hit in as_of] == [("c1", 1)]
        assert await stored_contexts(store) == expected_contexts(interleaved())


async def test_a_batch_split_in_two_gets_the_context_of_one_batch(open_keyword: Opener) -> None:
    """The second apply finds the earlier turns in the store: over several short turns, at most
    `CONTEXT_TURNS` of them, never past a long one, never another session's."""
    long_log, short_log, other = SessionLog("long"), SessionLog("short"), SessionLog("other")
    long_log.add("transcript.turn", {"role": "user", "text": words(10, "x")})
    long_log.add("transcript.turn", {"role": "user", "text": LONG})
    for n in range(12):
        short_log.add(
            "transcript.turn", {"role": "user", "text": f"s{n}a s{n}b"}
        )  # 2 words each: the 8 latest give 16
        long_log.add("transcript.turn", {"role": "user", "text": words(5, f"l{n}_")})
        other.add("transcript.turn", {"role": "user", "text": f"o{n}"})
    batch = [
        memory_docs(event) for logs in zip(short_log.events, other.events, strict=True) for event in logs
    ]
    batch += batch_of(long_log)
    expected = expected_contexts(batch)
    assert expected[("short", 12)].split() == [f"s{n}{x}" for n in range(3, 11) for x in "ab"]
    assert expected[("long", 4)].split() == [*LONG.split()[-(CONTEXT_WORDS - 10) :], *words(5, "l0_").split()]
    assert len(expected[("long", 14)].split()) == 5 * CONTEXT_TURNS  # the 8 latest turns give no more
    for cut in (1, 9, 17, 25, len(batch) - 3):
        async with open_keyword() as store:
            if isinstance(store, Neo4jKeywordStore):
                await store.clear()
            else:
                await store._db.write(lambda db: db.execute("DELETE FROM checkpoints"))
                await store._db.write(lambda db: db.execute("DELETE FROM docs"))
                await store._db.write(
                    lambda db: db.execute("INSERT INTO docs_fts(docs_fts) VALUES('rebuild')")
                )
            assert await store.apply("keyword", batch[:cut]) == cut
            assert await store.apply("keyword", batch[cut:]) == len(batch) - cut
            assert await stored_contexts(store) == expected, cut
            found = await store.search("s10b", limit=20)
            assert [(hit.doc.session, hit.doc.seq) for hit in found] == [("short", s) for s in range(11, 13)]


def vet_visit() -> SessionLog:
    log = SessionLog("v1")
    log.add(
        "transcript.turn",
        {"role": "user", "speaker": "Ana", "text": "Did you finally adopt the greyhound from the shelter?"},
    )
    log.add("transcript.turn", {"role": "user", "speaker": "Bo", "text": "yes, last Tuesday"})
    log.add("transcript.turn", {"role": "user", "speaker": "Ana", "text": "when is the vet visit?"})
    return log


async def test_a_keyword_file_made_before_context_is_migrated_on_open(tmp_path: Path) -> None:
    path = tmp_path / "keyword.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        """
        CREATE TABLE docs (id INTEGER PRIMARY KEY, session TEXT NOT NULL, seq INTEGER NOT NULL,
            event_hash TEXT NOT NULL, event_type TEXT NOT NULL, ts TEXT NOT NULL, kind TEXT NOT NULL,
            title TEXT NOT NULL, text TEXT NOT NULL, entity_name TEXT, entity_type TEXT, path TEXT,
            line_start INTEGER, line_end INTEGER);
        CREATE INDEX docs_session_seq ON docs(session, seq);
        CREATE INDEX docs_kind ON docs(kind);
        CREATE VIRTUAL TABLE docs_fts USING fts5(title, text, content='docs', content_rowid='id',
            tokenize='porter unicode61');
        CREATE TABLE checkpoints (projector TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL,
            event_hash TEXT NOT NULL, PRIMARY KEY (projector, session));
        """
    )
    batch = batch_of(vet_visit())
    for event in batch[:2]:  # as the keyword model wrote them before
        doc = event.docs[0]
        cursor = old.execute(
            "INSERT INTO docs (session, seq, event_hash, event_type, ts, kind, title, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (doc.session, doc.seq, doc.event_hash, doc.event_type, doc.ts, doc.kind, doc.title, doc.text),
        )
        old.execute(
            "INSERT INTO docs_fts (rowid, title, text) VALUES (?, ?, ?)",
            (cursor.lastrowid, doc.title, doc.text),
        )
    old.execute("INSERT INTO checkpoints VALUES ('keyword', 'v1', 2, ?)", (batch[1].event_hash,))
    old.commit()
    old.close()

    async with SqliteKeywordStore(path) as store:
        assert [hit.doc.seq for hit in await store.search("tuesday")] == [2]  # found as before
        assert await stored_contexts(store) == {("v1", 1): "", ("v1", 2): ""}
        assert await store.apply("keyword", batch) == 1
        # the new turn borrows from the old ones; an old turn has no context until the model is rebuilt
        assert [hit.doc.seq for hit in await store.search("greyhound")] == [1, 3]
        assert (await stored_contexts(store))[("v1", 3)] == expected_contexts(batch)[("v1", 3)]
    reopened = sqlite3.connect(path)
    columns = [row[1] for row in reopened.execute("PRAGMA table_info(docs)")]
    fts = reopened.execute("SELECT sql FROM sqlite_master WHERE name = 'docs_fts'").fetchone()[0]
    reopened.close()
    assert columns[-1] == "context" and "title, text, context" in fts
    async with SqliteKeywordStore(path) as again:  # migrated once: opening again changes nothing
        assert [hit.doc.seq for hit in await again.search("greyhound")] == [1, 3]
        assert [hit.doc.seq for hit in await again.search("tuesday")] == [2, 3]


async def test_a_neo4j_database_made_before_context_is_migrated_on_open(
    neo4j_endpoint: Neo4jEndpoint,
) -> None:
    async with keyword_on(neo4j_endpoint) as store:
        await store.clear()
        execute = auto_commit(store._docs._opened(), store._docs.database)
        for statement in (
            "MATCH (m:Migration {name: '0009_keyword_doc_context'}) DELETE m",
            "DROP INDEX keyword_doc_fulltext IF EXISTS",
            "DROP INDEX keyword_doc_session_seq IF EXISTS",
            "CREATE FULLTEXT INDEX keyword_doc_text IF NOT EXISTS FOR (d:KeywordDoc) "
            "ON EACH [d.title, d.text] OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
            "CALL db.awaitIndexes(300)",
        ):
            await execute(statement, {})
        await store.apply("keyword", batch_of(vet_visit())[:2])
        await execute("MATCH (d:KeywordDoc) REMOVE d.context", {})  # as written before
    async with keyword_on(neo4j_endpoint) as migrated:
        assert migrated._docs.migrations_applied == ["0009_keyword_doc_context"]
        execute = auto_commit(migrated._docs._opened(), migrated._docs.database)
        rows = await execute(
            "SHOW INDEXES YIELD name, properties, state WHERE name STARTS WITH 'keyword_doc'", {}
        )
        indexes = {row["name"]: (row["properties"], row["state"]) for row in rows}
        assert indexes["keyword_doc_fulltext"] == (["title", "text", "context"], "ONLINE")
        assert "keyword_doc_text" not in indexes
        assert indexes["keyword_doc_session_seq"] == (["session", "seq"], "ONLINE")
        assert [hit.doc.seq for hit in await migrated.search("tuesday")] == [2]  # found as before
        assert await migrated.apply("keyword", batch_of(vet_visit())) == 1
        assert [hit.doc.seq for hit in await migrated.search("greyhound")] == [1, 3]  # old: no context yet


# -- the vector model ---------------------------------------------------------------------------------


def test_a_document_decodes_with_or_without_context() -> None:
    doc = batch_of(conversation()[0])[1].docs[0]
    without = msgspec.msgpack.encode({k: v for k, v in msgspec.structs.asdict(doc).items() if k != "context"})
    assert msgspec.msgpack.decode(without, type=MemoryDoc) == doc
    carried = msgspec.structs.replace(doc, context="borrowed words")
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(carried), type=MemoryDoc) == carried
    assert msgspec.convert(msgspec.structs.asdict(doc), MemoryDoc) == doc
    assert embedded_text(carried) == embedded_text(doc)  # the vector model never embeds the context


async def test_the_vector_model_never_embeds_the_context(open_vector: Opener) -> None:
    filled = with_context(interleaved(), lambda session, seq: [])
    async with open_vector() as store:
        await store.apply("vector", filled)
        hits = await store.search("yes, last Tuesday", session="c1", limit=1)
        document, query = HashEmbedder().embed(["Bo\nyes, last Tuesday", "yes, last Tuesday"])
        assert hits[0].doc.seq == 2 and hits[0].score == pytest.approx(float(document @ query), abs=1e-5)
