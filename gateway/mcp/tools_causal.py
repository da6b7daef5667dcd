"""`memory_causal`: causal claims read as chains, paths and explanations (`readmodels.retrieval.causal_*`).

One tool, four questions (`ask`): what caused an entity, what it caused, how one led to another, and why an
outcome happened with its recorded explanations. Every answer is non-authoritative and cites, per step, the
event that recorded the edge and the events its evidence cites.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.mcp.arguments import After, AsOf, Name, Session, SnakeCase, position_after
from gateway.mcp.failures import ToolFailure
from readmodels.retrieval.causal_chains import CausalRequest
from readmodels.retrieval.causal_reads import (
    DEFAULT_PATH_LIMIT,
    MAX_PATH_LIMIT,
    CausalExplainRequest,
    CausalPathRequest,
)
from readmodels.retrieval.model import MAX_DEPTH, MAX_LIMIT

CausalAsk = Literal["causes", "effects", "path", "why"]
DEFAULT_CAUSAL_DEPTH = 3
DEFAULT_CAUSAL_LIMIT = 20
CAUSAL = """Follow recorded cause-and-effect between entities (decisions, tasks, outcomes, services), \
hop by hop; every step cited and non-authoritative (verify before acting).

ask: "causes" what led to `name`; "effects" what `name` led to; "path" the shortest chains from `name` \
(a cause) to `target` (an effect); "why" the outcomes `name` is or concerns, their causes and each \
recorded explanation.

Names may differ in case or be part of the entity's name; no match gives `suggestions`.

Example: {"session": "checkout-perf", "name": "Checkout p95 fell", "ask": "why"}. \
For what memory says about a topic, use memory_search."""


def register_causal_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool(description=CAUSAL)
    async def memory_causal(
        session: Session,
        name: Name,
        ask: CausalAsk = "causes",
        target: Annotated[Name | None, Field(description="path: the effect to reach.")] = None,
        entity_type: Annotated[SnakeCase | None, Field(description="Only entities of this type.")] = None,
        depth: Annotated[int | None, Field(ge=1, le=MAX_DEPTH, description="Most hops (default 3).")] = None,
        as_of: AsOf = None,
        after: After = None,
        limit: Annotated[
            int | None, Field(ge=1, le=MAX_LIMIT, description="Most edges a hop (path: paths, 20 at most).")
        ] = None,
    ) -> dict[str, Any]:
        if ask != "path" and target is not None:
            raise ToolFailure("invalid_input", "target: only with ask='path'")
        if ask == "path":
            if target is None:
                raise ToolFailure("invalid_input", "target: required with ask='path'")
            if entity_type is not None:
                raise ToolFailure("invalid_input", "entity_type: not with ask='path'")
            if limit is not None and limit > MAX_PATH_LIMIT:
                raise ToolFailure("invalid_input", f"limit: at most {MAX_PATH_LIMIT} paths with ask='path'")
            path = CausalPathRequest(
                session=session,
                source=name,
                target=target,
                depth=depth or MAX_DEPTH,
                as_of=as_of,
                limit=limit or DEFAULT_PATH_LIMIT,
                after=position_after(after),
            )
            return dict(msgspec.to_builtins(await backend.memory.causal_path(path)))
        depth, limit = depth or DEFAULT_CAUSAL_DEPTH, limit or DEFAULT_CAUSAL_LIMIT
        if ask == "why":
            why = CausalExplainRequest(
                session=session,
                name=name,
                entity_type=entity_type,
                depth=depth,
                as_of=as_of,
                limit=limit,
                after=position_after(after),
            )
            return dict(msgspec.to_builtins(await backend.memory.causal_explain(why)))
        chain = CausalRequest(
            session=session,
            name=name,
            direction="predecessors" if ask == "causes" else "successors",
            entity_type=entity_type,
            depth=depth,
            as_of=as_of,
            limit=limit,
            after=position_after(after),
        )
        return dict(msgspec.to_builtins(await backend.memory.causal(chain)))
