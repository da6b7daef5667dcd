"""Calling Eventloom's tools from Python through the official MCP client (the demo and the tests do)."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ToolCall = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""Calls one MCP tool with arguments and returns its structured result (raising on a tool error)."""


class ToolCallFailed(Exception):
    """A tool answered with a structured error."""

    def __init__(self, tool: str, error: dict[str, Any]) -> None:
        super().__init__(f"{tool}: {error.get('code')}: {error.get('message')}")
        self.tool = tool
        self.code = str(error.get("code"))
        self.error = error


def tool_caller(client: Client) -> ToolCall:
    async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(name, arguments)
        structured = result.structured_content or {}
        if result.is_error:
            raise ToolCallFailed(name, structured.get("error") or {"code": "unknown", "message": str(result)})
        return structured

    return call


def stdio_server(data_dir: Path, env: Mapping[str, str] | None = None) -> StdioServerParameters:
    """`eventloom --data-dir <data_dir> mcp`, as an MCP client's configuration would start it, with
    `env` as its whole environment (default: this process's)."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "gateway", "--data-dir", str(data_dir), "mcp"],
        env=dict(os.environ if env is None else env),
    )
