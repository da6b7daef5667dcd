"""Read-only Cypher over NATS request/reply: the process that owns the graph answers for everyone.

Subject `eventloom.q.graph.cypher`, queue group `graph`: any number of owners may answer, any number of
stateless clients may ask. Requests and replies are plain JSON at the wire boundary.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Final

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.errors import ReadModelUnavailableError
from readmodels.graph.protocol import GraphStore, GraphStoreError

CYPHER_SUBJECT: Final = "eventloom.q.graph.cypher"
MAX_QUERY_CHARS: Final = 4096


class CypherRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    cypher: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)


class CypherReply(msgspec.Struct, frozen=True, omit_defaults=True):
    rows: list[dict[str, Any]] = msgspec.field(default_factory=list)
    error: str | None = None


async def serve_cypher(client: Client, store: Callable[[], GraphStore], stop: asyncio.Event) -> None:
    """Answer read-only queries against whatever store `store()` returns now (it changes on a swap)."""

    async def answer(message: Msg) -> None:
        try:
            request = msgspec.json.decode(message.data, type=CypherRequest)
            if len(request.cypher) > MAX_QUERY_CHARS:
                raise GraphStoreError(f"cypher: longer than {MAX_QUERY_CHARS} characters")
            reply = CypherReply(rows=await store().query(request.cypher, request.params))
        except (
            msgspec.DecodeError,
            msgspec.ValidationError,
            GraphStoreError,
            ReadModelUnavailableError,
        ) as exc:
            reply = CypherReply(error=str(exc))
        await message.respond(msgspec.json.encode(reply))

    subscription = await client.subscribe(CYPHER_SUBJECT, queue="graph", cb=answer)
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(nats.errors.Error):
            await subscription.unsubscribe()


async def ask_cypher(
    client: Client, cypher: str, params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Raises GraphStoreError with the owner's message, or NoRespondersError when no owner runs."""
    request = CypherRequest(cypher=cypher, params=params or {})
    response = await client.request(CYPHER_SUBJECT, msgspec.json.encode(request), timeout=30)
    reply = msgspec.json.decode(response.data, type=CypherReply)
    if reply.error is not None:
        raise GraphStoreError(reply.error)
    return reply.rows
