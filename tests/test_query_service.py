"""The query service end to end: a node projects real appends, answers over NATS (queue group), and the
Python client and `eventloom memory query|checkout` get cited, time-aware answers."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Final

import pytest

from eventloom.event import Event, utc_timestamp
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from gateway.node import Node
from readmodels.backends import neo4j_keyword_store, neo4j_store, neo4j_vector_store
from readmodels.checkout.model import CheckoutRequest
from readmodels.neo4j.local import Neo4jEndpoint
from readmodels.query.client import MemoryClient
from readmodels.query.local import LocalMemory
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.query.service import serve_memory
from readmodels.retrieval.model import Query, QueryError
from readmodels.retrieval.read_models import ReadModels
from readmodels.vector.embedders import HashEmbedder
from tests.conftest import run_cli
from tests.runtime_support import drained

pytestmark = pytest.mark.anyio
MEMORY_CONSUMERS = ("projector-graph", "projector-keyword", "projector-vector", "projector-inferred")


def fact(name: str, entity_type: str, summary: str) -> dict[str, object]:
    return {"entities": [{"name": name, "entity_type": entity_type, "summary": summary}]}


async def tell_story(log: EventLog, session: str = "q1") -> list[Event]:
    """Postgres is upgraded (a new version supersedes the old), an LDAP bridge is invalidated."""
    events = [
        await log.append(
            session, "memory.fact.asserted", "agent:a", fact("postgres", "database", "Postgres 14")
        ),
        await log.append(
            session, "memory.fact.asserted", "agent:a", fact("ldap-bridge", "service", "LDAP sync")
        ),
        await log.append(
            session,
            "transcript.turn",
            "user",
            {"role": "user", "text": "The nightly backup of postgres failed"},
        ),
    ]
    await asyncio.sleep(0.01)
    events.append(
        await log.append(
            session, "memory.fact.asserted", "agent:a", fact("postgres", "database", "Postgres 16")
        )
    )
    events.append(
        await log.append(
            session,
            "memory.invalidated",
            "agent:a",
            {"entity": {"name": "ldap-bridge", "entity_type": "service"}, "invalid_at": utc_timestamp()},
        )
    )
    return events


async def start_node(settings: Settings) -> AsyncIterator[Node]:
    node = Node(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    await asyncio.wait_for(node.ready.wait(), 30)
    try:
        yield node
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[Node]:
    async for running in start_node(replace(settings, producers="none")):
        yield running


async def projected(log: EventLog) -> None:
    for consumer in MEMORY_CONSUMERS:
        await drained(log, consumer, timeout=60)


async def test_the_client_gets_current_cited_facts_and_the_past_as_of(node: Node, log: EventLog) -> None:
    events = await tell_story(log)
    await projected(log)
    memory = MemoryClient(log.client)
    now = await memory.query(Query(text="postgres database", session="q1"))
    postgres = [hit for hit in now.hits if hit.entity == "postgres"]
    assert [(h.summary, h.version, h.superseded_versions) for h in postgres] == [("Postgres 16", 2, 1)]
    assert postgres[0].citations[0].uri == events[3].citation
    assert all(hit.citations for hit in now.hits)
    then = await memory.query(Query(text="postgres database", session="q1", as_of=events[2].ts))
    assert [h.summary for h in then.hits if h.entity == "postgres"] == ["Postgres 14"]
    gone = await memory.query(Query(text="ldap-bridge", session="q1"))
    assert not [h for h in gone.hits if h.entity == "ldap-bridge"]
    was = await memory.query(Query(text="ldap-bridge", session="q1", as_of=events[2].ts))
    assert [h.summary for h in was.hits if h.entity == "ldap-bridge"] == ["LDAP sync"]


PARAPHRASED: Final = (
    "The physician prescribed antibiotics for the infection.",
    "Our quarterly revenue grew by twelve percent.",
    "I adopted a puppy from the animal shelter last weekend.",
    "The deployment pipeline failed because the disk was full.",
)


async def test_the_default_embedder_finds_a_paraphrase_with_no_word_in_common(
    node: Node, log: EventLog, settings: Settings
) -> None:
    assert settings.embedder == "wordllama"  # the default install's embedder, nothing configured
    turns = [
        await log.append("para", "transcript.turn", "user", {"role": "user", "text": text})
        for text in PARAPHRASED
    ]
    await projected(log)
    question = "Which doctor gave medicine to cure my bacterial illness?"
    words = {word for text in PARAPHRASED for word in re.findall(r"\w+", text.lower())}
    assert not words & set(re.findall(r"\w+", question.lower()))  # BM25 has nothing to go on
    result = await MemoryClient(log.client).query(Query(text=question, session="para", limit=3))
    top = result.hits[0]
    assert (top.kind, top.citations[0].uri) == ("event", turns[0].citation)
    assert set(top.explanation.lanes) == {"vector"}
    others = [hit.explanation.lanes["vector"].raw for hit in result.hits[1:]]
    assert all(raw < top.explanation.lanes["vector"].raw - 0.2 for raw in others)


async def test_checkout_over_the_service_is_cited_and_within_budget(node: Node, log: EventLog) -> None:
    await tell_story(log)
    await projected(log)
    checkout = await MemoryClient(log.client).checkout(
        CheckoutRequest(text="what happened to postgres backups?", session="q1", token_budget=400)
    )
    assert checkout.diagnostics.tokens <= 400
    assert [f.summary for f in checkout.facts if f.entity == "postgres"] == ["Postgres 16"]
    assert any("backup" in s.text for s in checkout.snippets)
    assert checkout.superseded_excluded >= 1
    assert checkout.answerability.answer_from_memory
    cited = {n for fact in checkout.facts for n in fact.evidence}
    for number in cited | {n for snippet in checkout.snippets for n in snippet.evidence}:
        assert f"[{number}] {checkout.evidence[number - 1].uri}" in checkout.prompt


async def test_bad_input_comes_back_as_an_error_naming_the_field(node: Node, log: EventLog) -> None:
    with pytest.raises(QueryError, match="as_of"):
        await MemoryClient(log.client).query(Query(text="x", as_of="2026-13-45T99:00:00Z"))


async def test_the_cli_queries_and_checks_out(node: Node, log: EventLog, settings: Settings) -> None:
    events = await tell_story(log)
    await projected(log)
    found = await asyncio.to_thread(
        run_cli, settings, "memory", "query", "postgres", "--session", "q1", "--limit", "3", "--json"
    )
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["entity"] == "postgres" and hits[0]["summary"] == "Postgres 16"
    assert len(hits) <= 3
    past = await asyncio.to_thread(
        run_cli, settings, "memory", "query", "postgres", "--session", "q1", "--as-of", events[1].ts
    )
    assert past.returncode == 0, past.stderr
    assert "Postgres 14" in past.stdout and "Postgres 16" not in past.stdout
    assert events[0].citation in past.stdout
    checkout = await asyncio.to_thread(
        run_cli, settings, "memory", "checkout", "postgres backup", "--session", "q1", "--budget", "300"
    )
    assert checkout.returncode == 0, checkout.stderr
    assert "# Memory checkout" in checkout.stdout and "## Evidence" in checkout.stdout
    bad = await asyncio.to_thread(run_cli, settings, "memory", "query", "x", "--limit", "500")
    assert bad.returncode == 2 and "limit" in bad.stderr


async def test_without_a_query_service_the_cli_and_client_say_so(log: EventLog, settings: Settings) -> None:
    with pytest.raises(MemoryUnavailableError, match="eventloom up"):
        await MemoryClient(log.client).query(Query(text="anything"))
    result = await asyncio.to_thread(run_cli, settings, "memory", "query", "anything")
    assert result.returncode == 1 and "no query service is running" in result.stderr


async def test_a_queue_group_of_services_shares_the_questions(log: EventLog) -> None:
    asked: list[str] = []

    def models(name: str) -> ReadModels:
        asked.append(name)
        return ReadModels()

    stop = asyncio.Event()
    servers = [
        asyncio.create_task(serve_memory(log.client, LocalMemory(lambda n=name: models(n)), stop))  # type: ignore[misc]
        for name in ("a", "b")
    ]
    await asyncio.sleep(0.2)
    memory = MemoryClient(log.client)
    for _ in range(40):
        result = await memory.query(Query(text="anything"))
        assert result.hits == [] and all(report.error for report in result.lanes)
    stop.set()
    await asyncio.gather(*servers)
    assert len(asked) == 40 and set(asked) == {"a", "b"}  # each question answered once, by either


@pytest.fixture
async def neo4j_node(settings: Settings, neo4j_endpoint: Neo4jEndpoint) -> AsyncIterator[Settings]:
    """A node whose graph, keyword and vector models live on the (shared, emptied) Neo4j server."""
    on_neo4j = replace(
        settings,
        producers="none",
        graph_backend="neo4j",
        embedder="hash",  # the shared test server's vector indexes are 384 wide, as `hash`'s vectors
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )
    vectors = neo4j_vector_store(on_neo4j, HashEmbedder())
    for store in (neo4j_store(on_neo4j), neo4j_keyword_store(on_neo4j), vectors):
        async with store:
            await store.clear()
    async for _ in start_node(on_neo4j):
        yield on_neo4j


async def test_on_neo4j_the_client_and_the_cli_get_cited_answers(neo4j_node: Settings, log: EventLog) -> None:
    events = await tell_story(log)
    await projected(log)
    memory = MemoryClient(log.client)
    now = await memory.query(Query(text="postgres database", session="q1"))
    assert [h.summary for h in now.hits if h.entity == "postgres"] == ["Postgres 16"]
    assert {r.lane for r in now.lanes if r.error is None} == {
        "exact",
        "keyword",
        "vector",
        "traversal",
        "verbatim",
    }
    then = await memory.query(Query(text="postgres database", session="q1", as_of=events[2].ts))
    assert [h.summary for h in then.hits if h.entity == "postgres"] == ["Postgres 14"]
    checkout = await memory.checkout(CheckoutRequest(text="postgres backup failed", session="q1"))
    assert any("backup" in snippet.text for snippet in checkout.snippets)
    found = await asyncio.to_thread(run_cli, neo4j_node, "memory", "query", "ldap-bridge", "--json")
    assert found.returncode == 0, found.stderr
    assert "ldap-bridge" not in {hit["entity"] for hit in json.loads(found.stdout)["hits"]}
    checked = await asyncio.to_thread(run_cli, neo4j_node, "memory", "checkout", "postgres", "--json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["facts"][0]["summary"] == "Postgres 16"


async def test_on_neo4j_a_read_after_an_append_sees_it(neo4j_node: Settings, log: EventLog) -> None:
    """The Neo4j stores keep the same checkpoints as the embedded ones: `after` waits on them alike."""
    memory = MemoryClient(log.client)
    for round_ in range(2):
        turn = {"role": "user", "text": f"the pangolin{round_} curled up"}
        request = AppendRequest(session="n1", type="transcript.turn", actor="user", payload=turn)
        (appended,) = await log.append_positioned([request])
        asked = Query(text=f"pangolin{round_}", session="n1", after=appended.position, after_wait_ms=10_000)
        result = await memory.query(asked)
        assert result.consistency is not None and result.consistency.lagging == {}
        assert appended.event.citation in [c.uri for hit in result.hits for c in hit.citations]
        checkout = await memory.checkout(
            CheckoutRequest(text=f"pangolin{round_}", session="n1", after=appended.position)
        )
        assert checkout.consistency is not None and checkout.consistency.lagging == {}
        assert appended.event.citation in [c.uri for c in checkout.evidence]
