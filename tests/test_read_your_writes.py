"""Reading your own writes: an append's position, given to a read as `after`, makes the read wait (boundedly)
until the read models it uses have applied the event; past the wait the answer names the ones that lag."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import msgspec
import pytest

from eventloom.errors import EventValidationError
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.position import Position
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from gateway.memory_role import memory_over
from gateway.node import Node
from projectors.plugins import load_projector
from projectors.runner import ProjectorRunner
from readmodels.checkout.model import CheckoutRequest
from readmodels.consistency import Lag, Progress
from readmodels.query.answers import ask, serve_answers
from readmodels.query.client import MemoryClient
from readmodels.query.service import Reply, serve_memory
from readmodels.retrieval.causal_chains import CausalRequest
from readmodels.retrieval.model import Query, QueryError
from tests.conftest import run_cli
from tests.test_query_service import start_node

pytestmark = pytest.mark.anyio


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[Node]:
    async for running in start_node(replace(settings, producers="none")):
        yield running


def turn(session: str, text: str) -> AppendRequest:
    return AppendRequest(
        session=session, type="transcript.turn", actor="user", payload={"role": "user", "text": text}
    )


def test_the_text_form_reads_back_and_bad_text_names_after() -> None:
    position = Position.parse("s-1_a/42")
    assert (position.session, position.seq, position.stream_seq) == ("s-1_a", 42, None)
    assert str(position) == position.text == "s-1_a/42"
    for bad in ("", "s1", "s1/", "/3", "s1/0", "s1/-2", "s1/x", "bad session/3"):
        with pytest.raises(EventValidationError, match=r"^after: ") as refused:
            Position.parse(bad)
        assert refused.value.field == "after"


def test_bad_after_on_the_wire_and_a_wait_past_the_cap_are_refused() -> None:
    with pytest.raises(msgspec.ValidationError, match=r"seq: must be 1 or more.*\$\.after"):
        msgspec.json.decode(b'{"text": "x", "after": {"session": "s1", "seq": 0}}', type=Query)
    with pytest.raises(QueryError, match=r"^after_wait_ms: "):
        Query(text="x", after=Position(session="s1", seq=1), after_wait_ms=60_000)


async def test_an_append_returns_its_position_with_the_stream_sequence(log: EventLog) -> None:
    first, second = await log.append_positioned([turn("p1", "one"), turn("p1", "two")])
    assert (first.position.text, second.position.text) == ("p1/1", "p1/2")
    for appended in (first, second):
        stored = await log.event("p1", appended.event.seq)
        assert stored is not None
        assert appended.position.stream_seq == stored.stream_seq


async def test_a_read_after_an_append_sees_it_at_once(node: Node, log: EventLog) -> None:
    memory = MemoryClient(log.client)
    for round_ in range(3):  # the first read also waits for the models' first batch
        (appended,) = await log.append_positioned([turn("r1", f"the zebracorn{round_} escaped the paddock")])
        result = await memory.query(Query(text=f"zebracorn{round_}", session="r1", after=appended.position))
        assert appended.event.citation in [c.uri for hit in result.hits for c in hit.citations]
        assert result.consistency is not None
        assert result.consistency.after == appended.position
        assert result.consistency.lagging == {}
        checkout = await memory.checkout(
            CheckoutRequest(text=f"zebracorn{round_}", session="r1", after=appended.position)
        )
        assert appended.event.citation in [c.uri for c in checkout.evidence]
        assert checkout.consistency is not None
        assert checkout.consistency.lagging == {}


async def test_a_graph_read_after_waits_for_the_graph(node: Node, log: EventLog) -> None:
    (appended,) = await log.append_positioned([turn("r2", "hello")])
    chain = await MemoryClient(log.client).causal(
        CausalRequest(session="r2", name="anything", direction="successors", after=appended.position)
    )
    assert chain.consistency is not None
    assert chain.consistency.lagging == {}


async def test_a_stopped_projector_is_named_after_the_wait_then_read_once_it_runs(
    settings: Settings, log: EventLog
) -> None:
    keyword = load_projector("keyword", settings)
    await keyword.open()
    stop, ready = asyncio.Event(), asyncio.Event()
    service = asyncio.create_task(
        serve_memory(log.client, memory_over(lambda: {"keyword": keyword}), stop, ready)
    )
    await asyncio.wait_for(ready.wait(), 10)
    memory = MemoryClient(log.client)
    try:
        (appended,) = await log.append_positioned([turn("r3", "the quokka sang")])
        ask = Query(
            text="quokka", session="r3", lanes=["keyword"], after=appended.position, after_wait_ms=100
        )
        lagging = await memory.query(ask)
        assert lagging.consistency is not None
        assert lagging.consistency.lagging == {"keyword": Lag(applied_seq=0, behind=1)}
        assert lagging.consistency.waited_ms >= 100
        assert any("keyword (at seq 0, 1 behind)" in warning for warning in lagging.warnings)
        assert lagging.hits == []
        await keyword.close()
        runner = ProjectorRunner(log.client, log.layout, keyword, keys=KeyStore(settings.data_dir))
        running = asyncio.create_task(runner.run(stop))
        seen = await memory.query(msgspec.structs.replace(ask, after_wait_ms=10_000))
        assert seen.consistency is not None
        assert seen.consistency.lagging == {}
        assert appended.event.citation in [c.uri for hit in seen.hits for c in hit.citations]
    finally:
        stop.set()
        await service
    await running


async def test_the_cli_prints_the_position_and_reads_after_it(node: Node, settings: Settings) -> None:
    # the CLI runs on a thread: the node answering it runs on this test's event loop
    appended = await asyncio.to_thread(
        run_cli,
        settings,
        "append", "--session", "c1", "--type", "transcript.turn", "--actor", "user",
        "--payload", json.dumps({"role": "user", "text": "the okapi left"}),
    )  # fmt: skip
    assert appended.returncode == 0, appended.stderr
    position = json.loads(appended.stdout)["position"]
    assert position == "c1/1"
    queried = await asyncio.to_thread(
        run_cli, settings, "memory", "query", "okapi", "--session", "c1", "--after", position, "--json"
    )
    assert queried.returncode == 0, queried.stderr
    answer = json.loads(queried.stdout)
    assert answer["consistency"]["lagging"] == {}
    assert json.loads(appended.stdout)["citation"] in [
        c["uri"] for hit in answer["hits"] for c in hit["citations"]
    ]
    refused = await asyncio.to_thread(run_cli, settings, "memory", "checkout", "okapi", "--after", "c1:1")
    assert refused.returncode == 2, refused.stderr
    assert "invalid input: after: expected SESSION/SEQ" in refused.stderr


async def test_a_waiting_reader_cuts_the_projectors_linger(settings: Settings, log: EventLog) -> None:
    """Projectors linger (here 2 s) for a larger batch under a trickle; a read given `after` does not wait
    for that: the node's projectors are told a reader waits, and apply what they hold at once."""
    lingering = replace(settings, producers="none", projector_linger_ms=2000)
    async for _ in start_node(lingering):
        memory = MemoryClient(log.client)
        (first,) = await log.append_positioned([turn("h1", "warm")])
        await memory.query(Query(text="warm", session="h1", after=first.position, after_wait_ms=10_000))
        for round_ in range(3):
            (appended,) = await log.append_positioned([turn("h1", f"the narwhal{round_} dove")])
            query = Query(
                text=f"narwhal{round_}", session="h1", after=appended.position, after_wait_ms=10_000
            )
            result = await memory.query(query)
            assert result.consistency is not None
            assert result.consistency.lagging == {}
            assert result.consistency.waited_ms < 2000, result.consistency
            assert appended.event.citation in [c.uri for hit in result.hits for c in hit.citations]


async def test_a_projectors_question_takes_after_whatever_its_own_fields(
    settings: Settings, log: EventLog
) -> None:
    """`serve_answers` takes `after` off any question: the answerer sees its own fields only, the answer
    waits for the projector's checkpoints, and the reply envelope says how it waited."""
    keyword = load_projector("keyword", settings)
    await keyword.open()
    bodies: list[object] = []

    async def answerer(question: str, body: bytes) -> object:
        bodies.append(msgspec.json.decode(body))
        return {"question": question}

    assert isinstance(keyword, Progress)
    stop, ready = asyncio.Event(), asyncio.Event()
    service = asyncio.create_task(
        serve_answers(log.client, "keyword", answerer, stop, ready, progress=keyword)
    )
    await asyncio.wait_for(ready.wait(), 10)
    try:
        (appended,) = await log.append_positioned([turn("r4", "the axolotl smiled")])
        request = {"entity": "axolotl", "after": msgspec.to_builtins(appended.position), "after_wait_ms": 100}
        raw = await log.client.request("eventloom.q.keyword.about", msgspec.json.encode(request), timeout=10)
        reply = msgspec.json.decode(raw.data, type=Reply)
        assert reply.result == {"question": "about"}
        assert reply.consistency is not None
        assert reply.consistency.lagging == {"keyword": Lag(applied_seq=0, behind=1)}
        await keyword.close()
        runner = ProjectorRunner(log.client, log.layout, keyword, keys=KeyStore(settings.data_dir))
        running = asyncio.create_task(runner.run(stop))
        answered = await ask(
            log.client,
            "keyword",
            "about",
            {"entity": "axolotl"},
            after=appended.position,
            after_wait_ms=10_000,
        )
        assert answered == {"question": "about"}
        assert bodies == [{"entity": "axolotl"}, {"entity": "axolotl"}]
        with pytest.raises(QueryError, match=r"^after: "):
            await ask(log.client, "keyword", "about", {"entity": "x", "after": "r4/1"})
    finally:
        stop.set()
        await service
    await running
