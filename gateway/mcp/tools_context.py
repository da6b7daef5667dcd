"""Tools for an agent's turn loop: the turn just spoken, and taking over a session."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.agent_loop import DEFAULT_REPLAY, after_turn, handoff_bundle
from gateway.mcp.arguments import After, Name, Session, TokenBudget, position_after
from gateway.mcp.caller import current_caller
from readmodels.checkout.model import DEFAULT_TOKEN_BUDGET

TURN = """Log a conversation turn verbatim (a cited, searchable transcript.turn) and get back what to \
read before answering it: the Memory Checkout for the turn.

Use once per turn an agent hears or speaks. Example: {"session": "support-chat", "text": "How long can \
prices be stale?", "role": "user", "speaker": "Dana"}. To record a decision or a fact, use memory_append."""
HANDOFF = """Take over a session from another agent: a summary, the last events, the integrity of the \
session's log (chain, signatures, ledger parity) and a Memory Checkout for `question`.

Use once when you start work someone else began. Example: {"session": "checkout-perf", "question": \
"What is left to do?"}."""


def register_context_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool(description=TURN)
    async def memory_record_turn(
        session: Session,
        text: Annotated[str, Field(min_length=1, max_length=65536, description="What was just said.")],
        role: Literal["user", "assistant", "system", "tool"] = "user",
        speaker: Name | None = None,
        turn_id: Annotated[str | None, Field(max_length=256)] = None,
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
        after: After = None,
    ) -> dict[str, Any]:
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
            after=position_after(after),
        )
        return dict(msgspec.to_builtins(turned))

    @server.tool(description=HANDOFF)
    async def memory_handoff(
        session: Session,
        question: Annotated[str | None, Field(max_length=4096, description="What you need to know.")] = None,
        replay: Annotated[int, Field(ge=0, le=100, description="How many last events to replay.")] = (
            DEFAULT_REPLAY
        ),
        token_budget: TokenBudget = DEFAULT_TOKEN_BUDGET,
        after: After = None,
    ) -> dict[str, Any]:
        bundle = await handoff_bundle(
            backend.log,
            backend.memory,
            session,
            question=question or None,
            replay=replay,
            token_budget=token_budget,
            verify_wait_s=2.0,
            after=position_after(after),
        )
        return dict(msgspec.to_builtins(bundle))
