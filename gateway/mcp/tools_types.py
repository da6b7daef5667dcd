"""`memory_event_types`: the event types `memory_append` takes, for an agent to look up before appending."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from eventloom.schemas import COMMON_EVENT_TYPES, OPEN_EVENT_TYPE_RULE, describe_event_types
from gateway.access.backend import Backend

TYPES = """Look up the event types memory_append takes. With no `type`: every type's name and what it \
records. With `type`: its payload schema and a valid example payload.

Use before appending a type you have not used yet. Example: {"type": "decision.made"}. A type starting \
with `x.` is yours to define (stored without a schema)."""


def register_type_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool(description=TYPES)
    async def memory_event_types(
        type: Annotated[
            str | None, Field(min_length=1, max_length=128, description="One type, described in full.")
        ] = None,
    ) -> dict[str, Any]:
        if type is not None:
            (described,) = describe_event_types([type])
            return {**msgspec.to_builtins(described), "open_types": OPEN_EVENT_TYPE_RULE}
        return {
            "types": [{"name": t.name, "description": t.description} for t in describe_event_types()],
            "common": list(COMMON_EVENT_TYPES),
            "open_types": OPEN_EVENT_TYPE_RULE,
        }
