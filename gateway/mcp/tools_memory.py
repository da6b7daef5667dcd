"""The default toolset's write and search tools: append an event, close a fact's window, search memory."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from eventloom.event import utc_timestamp
from eventloom.position import Appended
from eventloom.request import AppendRequest
from eventloom.schemas import COMMON_EVENT_TYPES
from gateway.access.backend import Backend
from gateway.mcp.arguments import (
    MAX_PAYLOAD_BYTES,
    After,
    AsOf,
    EventHash,
    Name,
    NestedArgument,
    Payload,
    Profile,
    Question,
    Session,
    SessionFilter,
    SnakeCase,
    position_after,
)
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from readmodels.checkout.model import (
    DEFAULT_TOKEN_BUDGET,
    MAX_TOKEN_BUDGET,
    MIN_TOKEN_BUDGET,
    CheckoutRequest,
)
from readmodels.retrieval.fusion import Lane
from readmodels.retrieval.model import DEFAULT_DEPTH, DEFAULT_LIMIT, MAX_DEPTH, MAX_LIMIT, Query

SearchAnswer = Literal["prompt", "checkout", "hits"]

APPEND = """Record one thing that happened as a typed, signed event in a session's log; returns its \
citation and `position` (pass it as `after` to a read that must see it).

Use for goals, tasks, decisions, findings, facts and outcomes. Common types: {types}. \
memory_event_types gives each type's payload schema and an example; an unknown type is refused with the \
closest known ones suggested (a type starting with `x.` is yours, stored without a schema).

Example: {{"session": "checkout-perf", "type": "decision.made", "payload": {{"decision_id": "d-redis", \
"title": "Cache prices in Redis", "rationale": "70% of latency"}}, "idempotency_key": "d-redis-1"}}.

Not for conversation turns (memory_record_turn) or closing a fact (memory_invalidate)."""
INVALIDATE = """Say that an entity or a relation stopped holding (from invalid_at, default now). \
Nothing is deleted: as_of reads before that time still see it.

Example: {"session": "checkout-perf", "entity": {"name": "legacy price service", "entity_type": "service"}, \
"reason": "decommissioned"}. To change a fact's value, append a new memory.fact.asserted instead."""
SEARCH = """Ask memory a question before answering from it: hybrid, cited, time-aware search (names, \
BM25, vectors, graph, verbatim sources). Cite the eventloom:// URIs it returns.

answer: "prompt" (default) the prompt-ready text within token_budget, its numbered evidence and whether \
to answer, refresh or ask the user; "checkout" the whole Memory Checkout (facts, snippets, inferred and \
causal context with diagnostics); "hits" ranked hits with score explanations (limit, depth, lanes).

Example: {"question": "How long are prices cached, and why?", "session": "checkout-perf"}. \
as_of reads the past. For what caused what, use memory_causal."""


class EntityArg(NestedArgument):
    name: Name
    entity_type: SnakeCase


class RelationArg(NestedArgument):
    source: Name
    target: Name
    relation_type: SnakeCase


def appended(stored: Appended) -> dict[str, Any]:
    event = stored.event
    return {
        "citation": event.citation,
        "session": event.session,
        "seq": event.seq,
        "position": stored.position.text,
        "stream_seq": stored.position.stream_seq,
        "hash": event.hash,
        "ts": event.ts,
        "type": event.type,
    }


async def append_one(backend: Backend, request: AppendRequest) -> dict[str, Any]:
    """Append `request`; the answer says where it went (`position`: what a read takes as `after`)."""
    (stored,) = await backend.log.append_positioned([request])
    return appended(stored)


def register_memory_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool(description=APPEND.format(types=", ".join(COMMON_EVENT_TYPES)))
    async def memory_append(
        session: Session,
        type: Annotated[str, Field(min_length=3, max_length=128, description="The event type.")],
        payload: Payload,
        actor: Annotated[str | None, Field(max_length=256, description="Default: you.")] = None,
        caused_by: Annotated[
            list[EventHash], Field(max_length=64, description="Hashes of the events that led to this one.")
        ] = [],  # noqa: B006 (pydantic copies)
        idempotency_key: Annotated[
            str | None, Field(max_length=256, description="Makes a retry safe: the same key appends once.")
        ] = None,
        expected_seq: Annotated[
            int | None,
            Field(ge=0, description="Append only if the session's newest seq is this (0: a new session)."),
        ] = None,
    ) -> dict[str, Any]:
        size = len(msgspec.json.encode(payload))
        if size > MAX_PAYLOAD_BYTES:
            raise ToolFailure(
                "payload_too_large", f"payload: {size} bytes of JSON, more than {MAX_PAYLOAD_BYTES}"
            )
        caller = current_caller()
        actor = actor or caller.actor
        if not caller.principal.may_act_as(actor):
            raise ToolFailure(
                "forbidden",
                f"actor: token {caller.principal.name!r} may append only as "
                f"{', '.join(caller.principal.actors)}",
            )
        request = AppendRequest(
            session=session,
            type=type,
            actor=actor,
            payload=payload,
            caused_by=list(caused_by),
            idempotency_key=idempotency_key,
            expected_seq=expected_seq,
            principal=caller.recorded_principal,
        )
        return await append_one(backend, request)

    @server.tool(description=INVALIDATE)
    async def memory_invalidate(
        session: Session,
        entity: EntityArg | None = None,
        relation: RelationArg | None = None,
        invalid_at: AsOf = None,
        reason: Annotated[str | None, Field(max_length=2000)] = None,
    ) -> dict[str, Any]:
        if entity is None and relation is None:
            raise ToolFailure("invalid_input", "entity: give the entity or the relation that stopped holding")
        payload: dict[str, Any] = {"invalid_at": invalid_at or utc_timestamp()}
        if entity is not None:
            payload["entity"] = entity.model_dump()
        if relation is not None:
            payload["relation"] = relation.model_dump()
        if reason:
            payload["reason"] = reason
        caller = current_caller()
        invalidated = AppendRequest(
            session=session,
            type="memory.invalidated",
            actor=caller.actor,
            payload=payload,
            principal=caller.recorded_principal,
        )
        return await append_one(backend, invalidated)

    @server.tool(description=SEARCH)
    async def memory_search(
        question: Question,
        session: SessionFilter = None,
        answer: SearchAnswer = "prompt",
        as_of: AsOf = None,
        after: After = None,
        profile: Profile = "balanced",
        token_budget: Annotated[
            int | None,
            Field(ge=MIN_TOKEN_BUDGET, le=MAX_TOKEN_BUDGET, description="prompt, checkout: most tokens."),
        ] = None,
        limit: Annotated[int | None, Field(ge=1, le=MAX_LIMIT, description="hits: how many.")] = None,
        depth: Annotated[int | None, Field(ge=0, le=MAX_DEPTH, description="hits: graph hops.")] = None,
        lanes: Annotated[list[Lane] | None, Field(description="hits: only these lanes.")] = None,
        include_inferred: bool = True,
    ) -> dict[str, Any]:
        _only_with(answer, {"limit": limit, "depth": depth, "lanes": lanes}, "hits")
        _only_with(answer, {"token_budget": token_budget}, "prompt", "checkout")
        if answer == "hits":
            query = Query(
                text=question,
                session=session,
                as_of=as_of,
                limit=limit or DEFAULT_LIMIT,
                profile=profile,
                depth=DEFAULT_DEPTH if depth is None else depth,
                lanes=lanes,
                include_inferred=include_inferred,
                after=position_after(after),
            )
            return dict(msgspec.to_builtins(await backend.memory.query(query)))
        request = CheckoutRequest(
            text=question,
            session=session,
            as_of=as_of,
            profile=profile,
            token_budget=token_budget or DEFAULT_TOKEN_BUDGET,
            include_inferred=include_inferred,
            after=position_after(after),
        )
        checkout = await backend.memory.checkout(request)
        if answer == "checkout":
            return dict(msgspec.to_builtins(checkout))
        return {
            "prompt": checkout.prompt,
            "evidence": [citation.uri for citation in checkout.evidence],
            "answerability": msgspec.to_builtins(checkout.answerability),
            "tokens": checkout.diagnostics.tokens,
            "warnings": checkout.warnings,
            **({"consistency": msgspec.to_builtins(checkout.consistency)} if checkout.consistency else {}),
        }


def _only_with(answer: str, arguments: dict[str, object], *answers: str) -> None:
    """An argument the chosen answer would ignore is refused, not dropped: the caller meant something."""
    if answer in answers:
        return
    for name, value in arguments.items():
        if value is not None:
            wanted = " or ".join(f"answer={choice!r}" for choice in answers)
            raise ToolFailure("invalid_input", f"{name}: only with {wanted}; answer={answer!r} ignores it")
