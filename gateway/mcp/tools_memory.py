"""Tools that write memory and ask it: append, invalidate, query, checkout, inferred status, causal chains."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from eventloom.event import Event, utc_timestamp
from gateway.access.backend import Backend
from gateway.mcp.arguments import (
    MAX_PAYLOAD_BYTES,
    AsOf,
    Depth,
    EventHash,
    Limit,
    Name,
    NestedArgument,
    Payload,
    Profile,
    Question,
    Session,
    SessionFilter,
    SnakeCase,
    TokenBudget,
)
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from readmodels.checkout.model import DEFAULT_TOKEN_BUDGET, CheckoutRequest
from readmodels.retrieval.causal_chains import CausalRequest
from readmodels.retrieval.fusion import Lane
from readmodels.retrieval.model import DEFAULT_DEPTH, DEFAULT_LIMIT, Query

CausalDepth = Annotated[int, Field(ge=1, le=5, description="How many causal hops to follow.")]


class EntityArg(NestedArgument):
    name: Name
    entity_type: SnakeCase


class RelationArg(NestedArgument):
    source: Name
    target: Name
    relation_type: SnakeCase


def appended(event: Event) -> dict[str, Any]:
    return {
        "citation": event.citation,
        "session": event.session,
        "seq": event.seq,
        "hash": event.hash,
        "ts": event.ts,
        "type": event.type,
    }


def register_memory_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool()
    async def memory_append(
        session: Session,
        type: Annotated[str, Field(min_length=3, max_length=128, description="e.g. decision.made")],
        payload: Payload,
        actor: Annotated[str | None, Field(max_length=256, description="Default: the caller")] = None,
        caused_by: Annotated[list[EventHash], Field(max_length=64)] = [],  # noqa: B006 (pydantic copies)
        idempotency_key: Annotated[str | None, Field(max_length=256)] = None,
        expected_seq: Annotated[
            int | None,
            Field(ge=0, description="Append only if the session's newest event is this seq (0: it is new)"),
        ] = None,
    ) -> dict[str, Any]:
        """Append one typed event (hash-chained, signed) to a session's log and return its citation.

        Known types are validated against their schema (docs/event-types.md); errors name the field.
        Pass an idempotency_key to make a retry safe, and expected_seq to append only if nobody else has
        since you read the session (a `conflict` error otherwise, and nothing is appended)."""
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
        event = await backend.log.append(
            session,
            type,
            actor,
            payload,
            caused_by=caused_by,
            idempotency_key=idempotency_key,
            expected_seq=expected_seq,
            principal=caller.recorded_principal,
        )
        return appended(event)

    @server.tool()
    async def memory_invalidate(
        session: Session,
        entity: EntityArg | None = None,
        relation: RelationArg | None = None,
        invalid_at: AsOf = None,
        reason: Annotated[str | None, Field(max_length=2000)] = None,
    ) -> dict[str, Any]:
        """Say that an entity or a relation stops holding (from invalid_at, default now).

        Nothing is deleted: the version's window closes, so as-of queries still see it before then."""
        payload: dict[str, Any] = {"invalid_at": invalid_at or utc_timestamp()}
        if entity is not None:
            payload["entity"] = entity.model_dump()
        if relation is not None:
            payload["relation"] = relation.model_dump()
        if reason:
            payload["reason"] = reason
        caller = current_caller()
        event = await backend.log.append(
            session, "memory.invalidated", caller.actor, payload, principal=caller.recorded_principal
        )
        return appended(event)

    @server.tool()
    async def memory_query(
        text: Question,
        session: SessionFilter = None,
        as_of: AsOf = None,
        limit: Limit = DEFAULT_LIMIT,
        profile: Profile = "balanced",
        depth: Depth = DEFAULT_DEPTH,
        lanes: list[Lane] | None = None,
        include_inferred: bool = True,
    ) -> dict[str, Any]:
        """Hybrid, cited retrieval: exact names, BM25, vectors, graph traversal and verbatim sources.

        Every hit carries its citations (eventloom:// URIs, with file lines for sources) and a score
        explanation. Superseded and invalidated facts are left out unless as_of asks for a time they held."""
        query = Query(
            text=text,
            session=session,
            as_of=as_of,
            limit=limit,
            profile=profile,
            depth=depth,
            lanes=lanes,
            include_inferred=include_inferred,
        )
        return dict(msgspec.to_builtins(await backend.memory.query(query)))

    @server.tool()
    async def memory_checkout(
        text: Question,
        session: SessionFilter = None,
        as_of: AsOf = None,
        profile: Profile = "balanced",
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
        include_inferred: bool = True,
    ) -> dict[str, Any]:
        """The Memory Checkout: current facts, verbatim snippets, inferred and causal context (marked
        non-authoritative), numbered evidence, answerability and guidance, and a prompt within the budget."""
        request = CheckoutRequest(
            text=text,
            session=session,
            as_of=as_of,
            profile=profile,
            token_budget=token_budget,
            include_inferred=include_inferred,
        )
        return dict(msgspec.to_builtins(await backend.memory.checkout(request)))

    @server.tool()
    async def memory_inferred_status(session: SessionFilter = None) -> dict[str, Any]:
        """Audit the inferred and causal edges: counts by kind, method and relation, confidence and trust
        statistics, evidence coverage, edges missing provenance, and samples."""
        return dict(msgspec.to_builtins(await backend.memory.inferred_status(session)))

    async def causal(
        direction: Literal["successors", "predecessors"],
        session: str,
        name: str,
        entity_type: str | None,
        depth: int,
        as_of: str | None,
        limit: int,
    ) -> dict[str, Any]:
        request = CausalRequest(
            session=session,
            name=name,
            direction=direction,
            entity_type=entity_type,
            depth=depth,
            as_of=as_of,
            limit=limit,
        )
        return dict(msgspec.to_builtins(await backend.memory.causal(request)))

    @server.tool()
    async def memory_causal_successors(
        session: Session,
        name: Name,
        entity_type: SnakeCase | None = None,
        depth: CausalDepth = 3,
        as_of: AsOf = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """What this entity caused: causal edges followed forward, hop by hop (non-authoritative, cited).

        The name may differ in case or be a part of the entity's name; with no match, `start` is empty and
        `suggestions` lists the closest names."""
        return await causal("successors", session, name, entity_type, depth, as_of, limit)

    @server.tool()
    async def memory_causal_predecessors(
        session: Session,
        name: Name,
        entity_type: SnakeCase | None = None,
        depth: CausalDepth = 3,
        as_of: AsOf = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """What caused this entity: causal edges followed backward, hop by hop (non-authoritative, cited).

        The name may differ in case or be a part of the entity's name; with no match, `start` is empty and
        `suggestions` lists the closest names."""
        return await causal("predecessors", session, name, entity_type, depth, as_of, limit)
