"""Tools that read causal claims as paths and explanations (`readmodels.retrieval.causal_reads`).

`memory_causal_successors` and `memory_causal_predecessors` live with the other memory tools
(`gateway.mcp.tools_memory`). Every answer is non-authoritative and cites, per step, the event that recorded
the edge and the events its evidence cites.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.mcp.arguments import AsOf, Limit, Name, Session, SnakeCase
from readmodels.retrieval.causal_reads import CausalExplainRequest, CausalPathRequest

PathDepth = Annotated[int, Field(ge=1, le=5, description="The longest path to look for, in edges.")]
PathLimit = Annotated[int, Field(ge=1, le=20, description="The most paths to return.")]
ExplainDepth = Annotated[int, Field(ge=1, le=5, description="How many hops of causes to follow.")]


def register_causal_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool()
    async def memory_causal_path(
        session: Session,
        source: Name,
        target: Name,
        depth: PathDepth = 5,
        as_of: AsOf = None,
        limit: PathLimit = 5,
    ) -> dict[str, Any]:
        """How `source` led to `target`: the shortest chains of causal edges from the one (a cause) to the
        other (an effect), each step cited (non-authoritative).

        Names may differ in case or be a part of an entity's name; an end that matches nothing has no
        entities, and `suggestions` lists the closest names for it. No path: `paths` is empty."""
        request = CausalPathRequest(
            session=session, source=source, target=target, depth=depth, as_of=as_of, limit=limit
        )
        return dict(msgspec.to_builtins(await backend.memory.causal_path(request)))

    @server.tool()
    async def memory_causal_explain(
        session: Session,
        name: Name,
        entity_type: SnakeCase | None = None,
        depth: ExplainDepth = 3,
        as_of: AsOf = None,
        limit: Limit = 20,
    ) -> dict[str, Any]:
        """Why an outcome happened: the outcomes `name` is, or that concern it (an outage of a service, by
        the service's name), their causal predecessors hop by hop, and each recorded `outcome.explained`
        explanation with the events it cites (non-authoritative)."""
        request = CausalExplainRequest(
            session=session, name=name, entity_type=entity_type, depth=depth, as_of=as_of, limit=limit
        )
        return dict(msgspec.to_builtins(await backend.memory.causal_explain(request)))
