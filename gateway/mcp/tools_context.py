"""Tools for an agent's turn loop: the prompt-ready context, the turn just spoken, and a session handoff."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.agent_loop import DEFAULT_REPLAY, after_turn, handoff_bundle
from gateway.mcp.arguments import AsOf, Name, Profile, Question, Session, SessionFilter, TokenBudget
from gateway.mcp.caller import current_caller
from readmodels.checkout.model import DEFAULT_TOKEN_BUDGET, CheckoutRequest


def register_context_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool()
    async def context_assemble(
        text: Question,
        session: SessionFilter = None,
        as_of: AsOf = None,
        profile: Profile = "balanced",
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
    ) -> dict[str, Any]:
        """Only what goes into the prompt: the checkout's text (within token_budget), the evidence it
        numbers, and whether to answer from memory, refresh, or ask the user. memory_checkout has the rest."""
        request = CheckoutRequest(
            text=text, session=session, as_of=as_of, profile=profile, token_budget=token_budget
        )
        checkout = await backend.memory.checkout(request)
        return {
            "prompt": checkout.prompt,
            "evidence": [citation.uri for citation in checkout.evidence],
            "answerability": msgspec.to_builtins(checkout.answerability),
            "tokens": checkout.diagnostics.tokens,
            "warnings": checkout.warnings,
        }

    @server.tool()
    async def context_after_turn(
        session: Session,
        text: Annotated[str, Field(min_length=1, max_length=65536, description="What was just said.")],
        role: Literal["user", "assistant", "system", "tool"] = "user",
        speaker: Name | None = None,
        turn_id: Annotated[str | None, Field(max_length=256)] = None,
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
    ) -> dict[str, Any]:
        """Log a conversation turn verbatim (as transcript.turn, cited and searchable) and return the
        Memory Checkout for it: what the agent should read before answering."""
        turned = await after_turn(
            backend.log,
            backend.memory,
            session,
            text,
            role=role,
            speaker=speaker,
            turn_id=turn_id,
            actor=current_caller().actor if role != "user" else None,
            principal=current_caller().recorded_principal,
            token_budget=token_budget,
        )
        return dict(msgspec.to_builtins(turned))

    @server.tool(name="handoff_bundle")
    async def handoff_bundle_tool(
        session: Session,
        question: Annotated[str | None, Field(max_length=4096)] = None,
        replay: Annotated[int, Field(ge=0, le=100, description="How many last events to replay.")] = (
            DEFAULT_REPLAY
        ),
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
    ) -> dict[str, Any]:
        """Everything a fresh agent taking over a session needs: a summary, the last events, the
        integrity of the session's log (chain, signatures, ledger parity) and a Memory Checkout."""
        bundle = await handoff_bundle(
            backend.log,
            backend.memory,
            session,
            question=question or None,
            replay=replay,
            token_budget=token_budget,
            verify_wait_s=2.0,
        )
        return dict(msgspec.to_builtins(bundle))
