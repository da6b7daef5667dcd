"""The keyword and vector models on Neo4j: their schema, their projectors on a real stream, and rebuilding
them in place (`eventloom rebuild keyword|vector` with `EVENTLOOM_GRAPH_BACKEND=neo4j`)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.doc_projector import InPlaceDocProjector
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from readmodels.backends import neo4j_keyword_store, neo4j_store, neo4j_vector_store
from readmodels.neo4j.graph_store import Neo4jGraphStore
from readmodels.neo4j.keyword_store import Neo4jKeywordStore
from readmodels.neo4j.vector_store import Neo4jVectorStore
from readmodels.vector.embedders import HashEmbedder
from tests.runtime_support import drained, running
from tests.test_keyword import story
from tests.test_memory_doc_backends import keyword_on

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio


async def test_the_neo4j_schema_holds_the_document_indexes(neo4j_endpoint: Neo4jEndpoint) -> None:
    graph = Neo4jGraphStore(neo4j_endpoint.uri, user=neo4j_endpoint.user, password=neo4j_endpoint.password)
    async with keyword_on(neo4j_endpoint), graph:
        rows = await graph.run_write("SHOW INDEXES YIELD name, type, state, options", {})
    indexes = {row["name"]: row for row in rows}
    assert indexes["keyword_doc_fulltext"]["type"] == "FULLTEXT" and "keyword_doc_text" not in indexes
    assert indexes["keyword_doc_fulltext"]["options"]["indexConfig"]["fulltext.analyzer"] == "english"
    config = indexes["vector_doc_embedding"]["options"]["indexConfig"]
    assert indexes["vector_doc_embedding"]["type"] == "VECTOR" and config["vector.dimensions"] == 384
    assert config["vector.similarity_function"] == "COSINE" and config["vector.quantization.enabled"] is False
    names = ("vector_doc_tag", "vector_doc_tag_session", "keyword_doc_uid", "keyword_doc_session_seq")
    assert {*names, "doc_checkpoint_key"} <= set(indexes)
    assert all(indexes[name]["state"] == "ONLINE" for name in indexes)


@pytest.fixture
def neo4j_settings(settings: Settings, neo4j_endpoint: Neo4jEndpoint) -> Settings:
    return dataclasses.replace(
        settings,
        graph_backend="neo4j",
        embedder="hash",  # the shared test server's vector indexes are 384 wide, as `hash`'s vectors
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )


async def _append_story(log: EventLog, session: str) -> int:
    events = story().events
    await log.append_many(
        [AppendRequest(session=session, type=e.type, actor="agent", payload=e.payload) for e in events]
    )
    return len(events)


async def _cleared(projector: InPlaceDocProjector[Any]) -> None:
    await projector.open()
    try:
        await projector.clear()
    finally:
        await projector.close()


async def test_the_projectors_on_neo4j_project_the_stream(log: EventLog, neo4j_settings: Settings) -> None:
    count = await _append_story(log, "p1")
    keyword = load_projector("keyword", neo4j_settings)
    vector = load_projector("vector", neo4j_settings)
    assert isinstance(keyword, InPlaceDocProjector) and isinstance(keyword.store, Neo4jKeywordStore)
    assert isinstance(vector, InPlaceDocProjector) and isinstance(vector.store, Neo4jVectorStore)
    await _cleared(keyword)
    await _cleared(vector)
    async with running(log, keyword) as keyword_runner, running(log, vector) as vector_runner:
        await drained(log, keyword_runner.consumer)
        await drained(log, vector_runner.consumer)
        found = await keyword.store.search("midnight refresh", session="p1")
        assert {hit.doc.kind for hit in found} >= {"turn", "decision"}
        assert found[0].citation.startswith("eventloom://p1/events/")
        near = await vector.store.search("token refresh keeps failing at midnight", session="p1")
        assert near[0].doc.kind == "turn" and near[0].tag == "hash@1/384"
        assert await keyword.applied_seqs(["p1"]) == await vector.applied_seqs(["p1"]) == {"p1": count}


async def test_rebuilding_in_place_on_neo4j_touches_only_its_own_model(
    log: EventLog, neo4j_settings: Settings
) -> None:
    count = await _append_story(log, "p2")
    async with await EventLog.open(neo4j_settings) as neo4j_log:
        report = await rebuild(neo4j_log, "keyword")
        assert report.in_place and report.generation == 0 and report.events == count
        assert (await rebuild(neo4j_log, "vector")).events == count
    keyword, vector = neo4j_keyword_store(neo4j_settings), neo4j_vector_store(neo4j_settings, HashEmbedder())
    async with keyword, vector:
        words = await keyword.search("midnight refresh", session="p2")
        near = await vector.search("token refresh keeps failing at midnight", session="p2")
        assert words and near and await keyword.applied_seqs("keyword", ["p2"]) == {"p2": count}
        async with neo4j_store(neo4j_settings) as graph:
            await graph.clear()  # the graph's own rebuild leaves the other models alone
        cli = subprocess.run(
            [sys.executable, "-m", "gateway", "rebuild", "vector", "--json"],
            env={**os.environ, **neo4j_settings.to_env()}, capture_output=True, text=True, timeout=120,
            check=False,
        )  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert json.loads(cli.stdout)["in_place"] is True and json.loads(cli.stdout)["events"] == count
        assert [hit.doc for hit in await keyword.search("midnight refresh", session="p2")] == [
            hit.doc for hit in words
        ]  # (Lucene counts deleted documents until its segments merge: the scores may move a little)
        assert await vector.search("token refresh keeps failing at midnight", session="p2") == near
        assert await vector.applied_seqs("vector", ["p2"]) == {"p2": count}
