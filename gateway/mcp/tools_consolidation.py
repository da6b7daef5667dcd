"""Tools over derived memory (the `review` toolset): propose, show or list consolidation candidates;
review one (review rights only); audit the inferred and causal edges.

Both call `gateway.consolidation`, as the CLI does. The server refuses `memory_consolidation_review` (and a
`memory_append` of a reviewer's event) to a token without review rights (`REVIEW_TOOLS`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway import consolidation
from gateway.access.backend import Backend
from gateway.mcp.arguments import EventHash, Limit, Name, NestedArgument, SessionFilter, SnakeCase
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from readmodels.retrieval.candidates import (
    DEFAULT_CANDIDATE_LIMIT,
    CandidateListRequest,
    CandidateRequest,
)

REVIEW_TOOLS: Final = frozenset({"memory_consolidation_review"})
INFERRED_STATUS = """Audit the inferred and causal edges: counts by kind, method and relation, confidence \
and trust statistics, evidence coverage, edges missing provenance, and samples."""
CandidateId = Annotated[str, Field(min_length=1, max_length=256)]
Text = Annotated[str, Field(min_length=1, max_length=20_000)]


class SourceEventArg(NestedArgument):
    session: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,128}$")]
    seq: Annotated[int, Field(ge=1)]
    hash: EventHash


class SubjectArg(NestedArgument):
    name: Name
    entity_type: SnakeCase


def register_consolidation_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool()
    async def memory_consolidation_candidate(
        action: Annotated[
            Literal["propose", "show", "list"] | None,
            Field(description="Default: propose with source_events, show with a candidate_id, else list"),
        ] = None,
        session: SessionFilter = None,
        candidate_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
        candidate_type: Literal["episode", "claim", "procedure"] | None = None,
        title: Annotated[str | None, Field(min_length=1, max_length=2000)] = None,
        summary: Text | None = None,
        source_events: Annotated[list[SourceEventArg], Field(max_length=256)] = [],  # noqa: B006
        confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5,
        method: Annotated[str, Field(min_length=1, max_length=512)] = "agent_proposed",
        purpose: Text | None = None,
        about: Annotated[list[SubjectArg], Field(max_length=64)] = [],  # noqa: B006
        status: Annotated[
            str | None, Field(description="list: only this status (pending, accepted, promoted, ...)")
        ] = None,
        limit: Limit = DEFAULT_CANDIDATE_LIMIT,
    ) -> dict[str, Any]:
        """Consolidation candidates: cited proposals to merge memory, never facts until a reviewer accepts.

        propose: session, candidate_type (episode|claim|procedure), title, summary, purpose and at least one
        source_events item {session, seq, hash} (each must exist in the log); candidate_id is derived when
        omitted. show: candidate_id (and session if the id is used in several): content, citations, status
        and review history. list: optional session, status, candidate_type, limit; newest first."""
        chosen = action or ("propose" if source_events else "show" if candidate_id else "list")
        if chosen == "list":
            request = CandidateListRequest(
                session=session, status=status, candidate_type=candidate_type, limit=limit
            )
            return dict(msgspec.to_builtins(await backend.memory.candidates(request)))
        if chosen == "show":
            if candidate_id is None:
                raise ToolFailure("invalid_input", "candidate_id: required to show a candidate")
            lookup = await backend.memory.candidate(
                CandidateRequest(candidate_id=candidate_id, session=session)
            )
            if lookup.found is None:
                raise ToolFailure(
                    "invalid_input", f"candidate_id: no candidate or same_as edge {candidate_id!r}"
                )
            return dict(msgspec.to_builtins(lookup.found))
        missing = [
            name
            for name, value in (
                ("session", session),
                ("candidate_type", candidate_type),
                ("title", title),
                ("summary", summary),
                ("purpose", purpose),
                ("source_events", source_events),
            )
            if not value
        ]
        if missing:
            raise ToolFailure("invalid_input", f"{missing[0]}: required to propose a candidate")
        assert session is not None and title is not None
        payload = {
            "candidate_id": candidate_id
            or consolidation.proposed_candidate_id(title, [s.model_dump() for s in source_events]),
            "candidate_type": candidate_type,
            "title": title,
            "summary": summary,
            "source_events": [s.model_dump() for s in source_events],
            "confidence": confidence,
            "method": method,
            "purpose": purpose,
            "about": [a.model_dump() for a in about],
            "summary_by": "agent",  # the proposing agent wrote title and summary
        }
        caller = current_caller()
        outcome = await consolidation.propose(
            backend.log, session, payload, actor=caller.actor, principal=caller.recorded_principal
        )
        return dict(msgspec.to_builtins(outcome))

    @server.tool()
    async def memory_consolidation_review(
        candidate_id: CandidateId,
        verdict: Literal["accepted", "rejected", "deferred", "conflicted"],
        rationale: Text,
        session: SessionFilter = None,
        conflicts_with: Annotated[list[CandidateId], Field(max_length=64)] = [],  # noqa: B006
    ) -> dict[str, Any]:
        """(review rights) Give a verdict on a consolidation candidate or a proposed same_as edge (edge_id).

        accepted promotes a candidate: it then answers queries as authoritative memory citing its sources
        (an accepted same_as edge is re-asserted as accepted; a rejected one is retracted). The reviewer
        recorded is your token's name. A repeated identical review appends nothing new."""
        caller = current_caller()
        outcome = await consolidation.review(
            backend.log,
            backend.memory,
            candidate_id,
            decision=verdict,
            rationale=rationale,
            reviewer=caller.principal.name,
            actor=caller.actor,
            principal=caller.recorded_principal,
            session=session,
            conflicts_with=conflicts_with,
        )
        return dict(msgspec.to_builtins(outcome))

    @server.tool(description=INFERRED_STATUS)
    async def memory_inferred_status(session: SessionFilter = None) -> dict[str, Any]:
        return dict(msgspec.to_builtins(await backend.memory.inferred_status(session)))
