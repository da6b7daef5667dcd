"""The claims pack's MCP tools (entry point `eventloom.mcp_tools` `claims`): recording observations and
claims, and the questions of `reads` (`mcp_reads`).

Each recording tool takes the `session` its event goes in, so a token's session scope applies to it. A
claim's `source_agent` (and its event's actor) is the authenticated caller (`mcp:<token name>`): an agent
cannot claim in another's name. Every cited event (a basis, a superseded claim, the claim accepted) is
checked against the log before anything is appended (`citing`), and it must be in a session the token may
touch. Accepting a claim materialises an edge, so it needs a token with review rights.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.mcp.arguments import Session
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from gateway.mcp.toolsets import tools_need
from gateway.packs.claims.citing import parse_ref
from gateway.packs.claims.client import ClaimsClient
from gateway.packs.claims.llm_extract import OpenAICompatibleTriples
from gateway.packs.claims.mcp_reads import register_read_tools
from gateway.packs.claims.model import event_key

Name = Annotated[str, Field(min_length=1, max_length=512)]
Text = Annotated[str | None, Field(min_length=1, max_length=100_000)]
Cited = Annotated[
    str,
    Field(
        min_length=3,
        max_length=300,
        description="A cited event: its eventloom://<session>/events/<seq>#<hash> citation, or its key "
        "<session>/<seq> as the claims tools return it.",
    ),
]
CitedList = Annotated[list[Cited], Field(min_length=1, max_length=100)]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, description="How sure, from 0 to 1.")]
Predicate = Annotated[
    str, Field(min_length=1, max_length=128, description="The relation, in words ('lives in') or LIVES_IN.")
]


def register(server: MCPServer, backend: Backend) -> None:
    """Entry point `eventloom.mcp_tools`: the recording tools, then the read tools."""
    register_record_tools(server, backend)
    register_claim_tools(server, backend)
    register_settling_tools(server, backend)
    register_read_tools(server, backend)


def client_of(backend: Backend) -> ClaimsClient:
    return ClaimsClient(backend.log, extractor=OpenAICompatibleTriples.from_settings(backend.settings))


def recorded(citation: str) -> dict[str, Any]:
    session, seq, _ = parse_ref("citation", citation)
    return {"citation": citation, "key": event_key(session, seq), "session": session, "seq": seq}


def check_scope(field: str, refs: list[str]) -> None:
    """Every cited event must be in a session the caller may touch (its content is read to check it)."""
    principal = current_caller().principal
    for i, ref in enumerate(refs):
        session, _, _ = parse_ref(f"{field}[{i}]", ref)
        if not principal.may_touch(session):
            raise ToolFailure(
                "forbidden", f"{field}[{i}]: token {principal.name!r} may not touch session {session!r}"
            )


def register_record_tools(server: MCPServer, backend: Backend) -> None:
    """What was seen."""

    @server.tool()
    async def claims_observe(
        session: Session,
        content: Annotated[str, Field(min_length=1, max_length=1_000_000, description="The text as seen.")],
        source: Annotated[str, Field(min_length=1, max_length=512, description="Where it was seen.")],
        observed_at: Annotated[
            str | None, Field(max_length=64, description="RFC 3339 (default: now).")
        ] = None,
    ) -> dict[str, Any]:
        """Record something seen (a message, a document, a tool's output), verbatim, with the entities
        and facts extraction finds in it. It never makes a claim: claim with claims_claim, citing it."""
        caller = current_caller()
        citation = await client_of(backend).observe(
            content,
            source=source,
            session=session,
            observed_at=observed_at,
            actor=caller.actor,
            principal=caller.recorded_principal,
        )
        return recorded(citation)


def register_claim_tools(server: MCPServer, backend: Backend) -> None:
    """Claims, resolutions, acceptances."""

    @server.tool()
    async def claims_claim(
        session: Session,
        subject: Name,
        predicate: Predicate,
        object: Name,
        confidence: Confidence,
        basis: CitedList,
        negated: bool = False,
        statement: Text = None,
    ) -> dict[str, Any]:
        """Claim `subject` `predicate` `object` (e.g. Alice, "lives in", Paris) with `confidence`, resting
        on `basis`: the observations (or claims) it was concluded from, each checked against the log.
        `negated`: the claim is that it does NOT hold. The claim is yours (your token's agent), never a
        fact: a conflicting claim is reported by claims_contradictions."""
        check_scope("basis", basis)
        caller = current_caller()
        citation = await client_of(backend).claim(
            subject,
            predicate,
            object,
            confidence=confidence,
            basis=basis,
            agent=caller.actor,
            session=session,
            negated=negated,
            statement=statement,
            principal=caller.recorded_principal,
        )
        return recorded(citation)


def register_settling_tools(server: MCPServer, backend: Backend) -> None:
    """Resolutions and acceptances: what settles claims (accepting is seen only by reviewers)."""
    tools_need(server, "review", "claims_accept")

    @server.tool()
    async def claims_resolve(
        session: Session,
        subject: Name,
        predicate: Predicate,
        object: Name,
        confidence: Confidence,
        basis: CitedList,
        supersedes: CitedList,
        negated: bool = False,
        statement: Text = None,
        reason: Text = None,
    ) -> dict[str, Any]:
        """A resolution: claim what holds (as claims_claim) and settle the claims it `supersedes` (their
        keys or citations, e.g. both sides of a contradiction). Settled claims leave claims_about and
        their contradictions close."""
        check_scope("basis", basis)
        check_scope("supersedes", supersedes)
        caller = current_caller()
        citation = await client_of(backend).resolve(
            subject,
            predicate,
            object,
            confidence=confidence,
            basis=basis,
            supersedes=supersedes,
            agent=caller.actor,
            session=session,
            negated=negated,
            statement=statement,
            reason=reason,
            principal=caller.recorded_principal,
        )
        return recorded(citation)

    @server.tool()
    async def claims_accept(session: Session, claim: Cited, reason: Text = None) -> dict[str, Any]:
        """Accept `claim` (its key or citation) as a reviewer, so it materialises its relation between
        the two entities, marked as derived from the claim. Needs a token with review rights."""
        caller = current_caller()
        if not caller.principal.reviewer:
            raise ToolFailure(
                "forbidden", f"claim: accepting needs review rights; token {caller.principal.name!r} has none"
            )
        check_scope("claim", [claim])
        citation = await client_of(backend).accept(
            claim, caller.actor, session=session, reason=reason, principal=caller.recorded_principal
        )
        return recorded(citation)
