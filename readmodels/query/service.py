"""Memory queries over NATS request/reply, in the queue group `memory`, so gateways stay stateless.

Subjects (`eventloom.q.memory.*`): `query` (a `Query`), `checkout` (a `CheckoutRequest`), `inferred`
(`{"session": ...}`), `causal` (a `CausalRequest`), `causal_path` (a `CausalPathRequest`), `causal_explain`
(a `CausalExplainRequest`), `candidates` (a `CandidateListRequest`), `candidate` (a
`CandidateRequest`), `graph_view` (a `readmodels.view.ViewRequest`, answered with a `ViewGraph`) and
`health` (`{}`, answered with a `ServiceHealth`:
`ok` is false while a role of the service's process is failing, and `failing` names each). Replies
are `{"result": ...}` or `{"error": {"code", "message"}}`; codes are `invalid_input` (the message names the
field), `unavailable` (also when too many questions already wait: ask again) and `internal`. Plain JSON on
the wire. A few questions are answered at once (`readmodels.query.responder`), health probes ahead of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.runtime import RoleState
from readmodels.checkout.model import CheckoutRequest
from readmodels.consistency import Consistency
from readmodels.query.protocol import MemoryService, MemoryUnavailableError
from readmodels.query.responder import Responder
from readmodels.retrieval.candidates import CandidateListRequest, CandidateRequest
from readmodels.retrieval.causal_chains import CausalRequest
from readmodels.retrieval.causal_reads import CausalExplainRequest, CausalPathRequest
from readmodels.retrieval.model import Query, QueryError
from readmodels.view import ViewRequest

log = logging.getLogger(__name__)
SUBJECT_PREFIX: Final = "eventloom.q.memory."
QUEUE: Final = "memory"
BUSY: Final = "the query service is busy: too many questions are waiting; ask again in a moment"
ErrorCode = Literal["invalid_input", "unavailable", "internal"]


class ErrorBody(msgspec.Struct, frozen=True):
    code: ErrorCode
    message: str


class Reply(msgspec.Struct, frozen=True, omit_defaults=True):
    result: Any = None
    error: ErrorBody | None = None
    consistency: Consistency | None = None
    """A projector's answer to a question given `after` (`readmodels.query.answers`): how it waited and
    whether its read model still lagged. The memory service's results carry their own instead."""


BUSY_REPLY: Final = msgspec.json.encode(Reply(error=ErrorBody("unavailable", BUSY)))


class ServiceHealth(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    failing: dict[str, RoleState] = msgspec.field(default_factory=dict)


FailingRoles = Callable[[], Mapping[str, RoleState]]


class InferredRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    session: str | None = None


def _handlers(
    memory: MemoryService, failing: FailingRoles | None
) -> dict[str, Callable[[bytes], Awaitable[Any]]]:
    async def query(data: bytes) -> Any:
        return await memory.query(msgspec.json.decode(data, type=Query))

    async def checkout(data: bytes) -> Any:
        return await memory.checkout(msgspec.json.decode(data, type=CheckoutRequest))

    async def inferred(data: bytes) -> Any:
        return await memory.inferred_status(msgspec.json.decode(data, type=InferredRequest).session)

    async def causal(data: bytes) -> Any:
        return await memory.causal(msgspec.json.decode(data, type=CausalRequest))

    async def causal_path(data: bytes) -> Any:
        return await memory.causal_path(msgspec.json.decode(data, type=CausalPathRequest))

    async def causal_explain(data: bytes) -> Any:
        return await memory.causal_explain(msgspec.json.decode(data, type=CausalExplainRequest))

    async def candidates(data: bytes) -> Any:
        return await memory.candidates(msgspec.json.decode(data, type=CandidateListRequest))

    async def candidate(data: bytes) -> Any:
        return await memory.candidate(msgspec.json.decode(data, type=CandidateRequest))

    async def graph_view(data: bytes) -> Any:
        return await memory.graph_view(msgspec.json.decode(data, type=ViewRequest))

    async def health(data: bytes) -> Any:
        troubles = dict(failing()) if failing is not None else {}
        return ServiceHealth(ok=not troubles, failing=troubles)

    return {
        "query": query,
        "checkout": checkout,
        "inferred": inferred,
        "causal": causal,
        "causal_path": causal_path,
        "causal_explain": causal_explain,
        "candidates": candidates,
        "candidate": candidate,
        "graph_view": graph_view,
        "health": health,
    }


async def answer(handler: Callable[[bytes], Awaitable[Any]], data: bytes) -> Reply:
    try:
        return Reply(result=await handler(data))
    except (msgspec.DecodeError, msgspec.ValidationError, QueryError) as exc:
        return Reply(error=ErrorBody("invalid_input", str(exc)))
    except MemoryUnavailableError as exc:
        return Reply(error=ErrorBody("unavailable", str(exc)))
    except Exception as exc:  # the asker gets a reply, not a timeout
        log.exception("memory query failed")
        return Reply(error=ErrorBody("internal", f"{type(exc).__name__}: {exc}"))


async def serve_memory(
    client: Client,
    memory: MemoryService,
    stop: asyncio.Event,
    ready: asyncio.Event | None = None,
    *,
    failing: FailingRoles | None = None,
) -> None:
    """Answer memory queries until `stop` is set; `ready` is set once the server knows the subscriptions.
    `failing` names the roles of this process that fail (the health answer reports them)."""
    handlers = _handlers(memory, failing)

    async def respond(message: Msg) -> None:
        handler = handlers.get(message.subject.removeprefix(SUBJECT_PREFIX))
        if handler is None:
            unknown = f"subject: {message.subject!r} is not a memory query"
            reply = Reply(error=ErrorBody("invalid_input", unknown))
        else:
            reply = await answer(handler, message.data)
        await message.respond(msgspec.json.encode(reply))

    responder = Responder(
        client,
        SUBJECT_PREFIX + "*",
        QUEUE,
        respond,
        busy=lambda message: message.respond(BUSY_REPLY),
        immediate=frozenset({SUBJECT_PREFIX + "health"}),
    )
    await responder.serve(stop, ready)
