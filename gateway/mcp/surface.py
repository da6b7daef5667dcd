"""What the MCP server shows an agent before it asks anything: each toolset's tools, as `tools/list` sends
them, and what they cost in an agent's context (`eventloom toolsets`, `bench/mcp_surface.py`, the docs'
tool tables, which a test keeps equal to this)."""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any, Final, cast

from mcp.types import ListToolsResult

from gateway.access.backend import Backend
from gateway.mcp.server import EventloomMCP, LocalOperator
from gateway.mcp.toolsets import DEFAULT_TOOLSET, catalogue_of

_SENTENCE_END: Final = re.compile(r"(?<=[^.]{4}[.:;])\s+(?=[A-Z(])")
CHARS_PER_TOKEN: Final = 4
TOKENIZER: Final = "chars/4 of the compact JSON of tools/list"


@dataclass(frozen=True)
class ToolsetSurface:
    name: str
    tools: list[dict[str, Any]]
    """Each tool as `tools/list` sends it: name, description, input and output schemas."""
    needs: dict[str, str]
    """The right a tool needs beyond the toolset (`admin`, `review`), by tool name."""

    @property
    def listed_json(self) -> str:
        """The toolset's `tools/list` answer on the wire (compact JSON, as the SDK sends it)."""
        return json.dumps({"tools": self.tools}, separators=(",", ":"), ensure_ascii=False)

    @property
    def tokens(self) -> int:
        return -(-len(self.listed_json) // CHARS_PER_TOKEN)


def toolset_surfaces() -> list[ToolsetSurface]:
    """Every installed toolset, `default` first, with its tools as a caller allowed all of them sees them."""
    server = EventloomMCP(cast(Backend, None), LocalOperator(), DEFAULT_TOOLSET)
    listed = asyncio.run(server.list_tools())
    as_sent = ListToolsResult(tools=listed).model_dump(by_alias=True, exclude_none=True, mode="json")
    by_name = {tool["name"]: tool for tool in as_sent["tools"]}
    catalogue = catalogue_of(server)
    return [
        ToolsetSurface(
            name,
            [by_name[tool] for tool in catalogue.tools_of(name)],
            {tool: right for tool, right in catalogue.needs.items() if tool in catalogue.tools_of(name)},
        )
        for name in catalogue.toolsets
    ]


def markdown_table(surfaces: list[ToolsetSurface]) -> str:
    """The tools by toolset as docs/mcp.md lists them (a test keeps the doc equal to this)."""
    who = {"admin": "an admin token", "review": "review rights"}
    lines = ["| toolset | tool | what it does | needs |", "|---|---|---|---|"]
    for surface in surfaces:
        for tool in surface.tools:
            needs = who.get(surface.needs.get(tool["name"], ""), "")
            lines.append(
                f"| `{surface.name}` | `{tool['name']}` | {first_line(tool['description'])} | {needs} |"
            )
    return "\n".join(lines)


def first_line(description: str) -> str:
    """A tool's description up to its first sentence's end, for tables."""
    sentence = _SENTENCE_END.split(description.split("\n", 1)[0], maxsplit=1)[0]
    return sentence if sentence.endswith(".") else sentence + "."
