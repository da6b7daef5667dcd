"""Request/reply services answer several questions at once, skip the ones whose askers gave up, say "busy"
at once instead of queueing without bound, and answer health probes ahead of the queue (real nats-server)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import msgspec
import nats
import nats.errors
import pytest
from hypothesis import given
from hypothesis import strategies as st
from nats.aio.client import Client
from nats.aio.msg import Msg

from readmodels.query.client import request_reply
from readmodels.query.responder import (
    _LONGEST_ASKER_TIMEOUT_S,
    DEFAULT_ASKER_TIMEOUT_S,
    TIMEOUT_HEADER,
    Responder,
    ServingLimits,
    asker_timeout_s,
    timeout_headers,
)
from readmodels.query.service import serve_memory
from tests.conftest import NatsServer

pytestmark = pytest.mark.anyio
SUBJECT = "eventloom.q.test.*"


@dataclass
class Held:
    """A service whose answers wait until `release` is set; it records what it was asked."""

    release: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[bytes] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0

    async def respond(self, message: Msg) -> None:
        self.asked.append(message.data)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.release.wait()
        finally:
            self.in_flight -= 1
        await message.respond(b"answer:" + message.data)

    @staticmethod
    async def busy(message: Msg) -> None:
        await message.respond(b"busy")

    @staticmethod
    async def health(message: Msg) -> None:
        await message.respond(b"healthy")


@pytest.fixture
async def client(nats_server: NatsServer) -> AsyncIterator[Client]:
    connection = await nats.connect(nats_server.url)
    yield connection
    await connection.close()


async def serving(
    client: Client, held: Held, limits: ServingLimits, stop: asyncio.Event
) -> asyncio.Task[None]:
    async def respond(message: Msg) -> None:
        if message.subject.endswith(".health"):
            await held.health(message)
        else:
            await held.respond(message)

    responder = Responder(
        client, SUBJECT, "test", respond, held.busy, limits, immediate=frozenset({"eventloom.q.test.health"})
    )
    subscribed = asyncio.Event()
    task = asyncio.create_task(responder.serve(stop, subscribed))
    await asyncio.wait_for(subscribed.wait(), 10)
    return task


async def ask(client: Client, body: bytes, timeout_s: float = 10.0) -> bytes:
    reply = await client.request(
        "eventloom.q.test.ask", body, timeout=timeout_s, headers=timeout_headers(timeout_s)
    )
    return reply.data


async def until(condition: object, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not callable(condition) or not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_questions_are_answered_several_at_once(client: Client) -> None:
    held, stop = Held(), asyncio.Event()
    task = await serving(client, held, ServingLimits(concurrency=3, max_waiting=16), stop)
    asks = [asyncio.create_task(ask(client, str(n).encode())) for n in range(5)]
    await until(lambda: held.in_flight == 3)
    held.release.set()
    answers = await asyncio.gather(*asks)
    assert sorted(answers) == sorted(b"answer:" + str(n).encode() for n in range(5))
    assert held.most_in_flight == 3
    stop.set()
    await task


async def test_a_question_whose_asker_gave_up_is_not_answered(client: Client) -> None:
    held, stop = Held(), asyncio.Event()
    task = await serving(client, held, ServingLimits(concurrency=1, max_waiting=16), stop)
    first = asyncio.create_task(ask(client, b"first"))
    await until(lambda: held.in_flight == 1)
    with pytest.raises(nats.errors.TimeoutError):
        await ask(client, b"impatient", timeout_s=0.3)
    held.release.set()
    assert await first == b"answer:first"
    assert await ask(client, b"after") == b"answer:after"
    assert held.asked == [b"first", b"after"]
    stop.set()
    await task


async def test_a_full_queue_says_busy_at_once_and_health_is_answered_ahead(client: Client) -> None:
    held, stop = Held(), asyncio.Event()
    task = await serving(client, held, ServingLimits(concurrency=1, max_waiting=2), stop)
    answering = asyncio.create_task(ask(client, b"0"))
    await until(lambda: held.in_flight == 1)
    waiting = [asyncio.create_task(ask(client, str(n).encode())) for n in (1, 2)]
    await asyncio.sleep(0.2)  # both are in the queue: the worker is held
    assert await ask(client, b"3", timeout_s=2) == b"busy"
    health = await client.request("eventloom.q.test.health", b"{}", timeout=2)
    assert health.data == b"healthy"
    held.release.set()
    assert sorted(await asyncio.gather(answering, *waiting)) == [b"answer:0", b"answer:1", b"answer:2"]
    stop.set()
    await task


async def test_the_memory_service_answers_through_the_responder(client: Client) -> None:
    """The query service's own envelope: an unknown question is refused and named."""
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve_memory(client, object(), stop, ready))  # type: ignore[arg-type]
    await asyncio.wait_for(ready.wait(), 10)
    reply = await client.request("eventloom.q.memory.nothing", b"{}", timeout=5)
    error = msgspec.json.decode(reply.data)["error"]
    assert error["code"] == "invalid_input"
    assert "eventloom.q.memory.nothing" in error["message"]
    health = await request_reply(client, "eventloom.q.memory.health", {}, 5, nobody="none", late="late")
    assert health["ok"] is True
    stop.set()
    await task


@given(st.one_of(st.none(), st.text(max_size=40), st.floats().map(str)))
def test_any_timeout_header_means_a_finite_positive_wait(header: str | None) -> None:
    message = Msg(None, headers=None if header is None else {TIMEOUT_HEADER: header})  # type: ignore[arg-type]
    wait = asker_timeout_s(message)
    assert 0 < wait <= _LONGEST_ASKER_TIMEOUT_S
    if header is None:
        assert wait == DEFAULT_ASKER_TIMEOUT_S
