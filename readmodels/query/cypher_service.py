"""Read-only Cypher over NATS request/reply: the process that owns the graph answers for everyone.

Subject `eventloom.q.graph.cypher`, queue group `graph`: any number of owners may answer, any number of
stateless clients may ask. Requests and replies are plain JSON at the wire boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.errors import ReadModelUnavailableError
from readmodels.graph.protocol import GraphStore, GraphStoreError
from readmodels.query.responder import Responder, timeout_headers

CYPHER_SUBJECT: Final = "eventloom.q.graph.cypher"
MAX_QUERY_CHARS: Final = 4096
CYPHER_TIMEOUT_S: Final = 30.0
BUSY: Final = "the graph is busy: too many queries are waiting; ask again in a moment"


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

    async def busy(message: Msg) -> None:
        await message.respond(msgspec.json.encode(CypherReply(error=BUSY)))

    await Responder(client, CYPHER_SUBJECT, "graph", answer, busy).serve(stop)


async def ask_cypher(
    client: Client, cypher: str, params: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Raises GraphStoreError with the owner's message, or NoRespondersError when no owner runs."""
    request = CypherRequest(cypher=cypher, params=params or {})
    body = msgspec.json.encode(request)
    headers = timeout_headers(CYPHER_TIMEOUT_S)
    response = await client.request(CYPHER_SUBJECT, body, timeout=CYPHER_TIMEOUT_S, headers=headers)
    reply = msgspec.json.decode(response.data, type=CypherReply)
    if reply.error is not None:
        raise GraphStoreError(reply.error)
    return reply.rows
