"""Toolsets: an agent sees the default toolset unless the server or its token enables more, never a tool it
may not use, and a call outside its toolsets is refused saying how to enable it. The docs list exactly the
tools the server serves."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
from mcp import Client

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.backend import Backend
from gateway.access.tokens import Principal, TokenBook, add_token
from gateway.mcp.client import tool_caller
from gateway.mcp.server import EventloomMCP
from gateway.mcp.surface import markdown_table, toolset_surfaces
from readmodels.query.client import MemoryClient
from tests.conftest import run_cli
from tests.mcp_support import (
    ADMIN_TOOLS,
    CLAIMS_TOOLS,
    DEFAULT_TOOLS,
    EVERY_TOOL,
    REVIEW_TOOLS,
    WORKFLOW_READ_TOOLS,
    WORKFLOW_RECORDING_TOOLS,
    failure,
)
from tests.test_workflow_mcp import Token

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent


async def listed(log: EventLog, principal: Principal, toolsets: str | None = None) -> set[str]:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1))
    async with Client(EventloomMCP(backend, Token(principal), toolsets)) as client:
        return {tool.name for tool in (await client.list_tools()).tools}


async def test_an_agent_sees_the_default_toolset_and_only_what_it_may_use(log: EventLog) -> None:
    agent = Principal("bot", "agent", ("*",))
    assert await listed(log, agent) == DEFAULT_TOOLS
    assert len(DEFAULT_TOOLS) <= 10
    every = WORKFLOW_READ_TOOLS | WORKFLOW_RECORDING_TOOLS | CLAIMS_TOOLS
    # every toolset, but neither review rights nor the admin role: their tools stay out of sight
    assert await listed(log, agent, "all") == (DEFAULT_TOOLS | REVIEW_TOOLS | every) - {
        "memory_consolidation_review",
        "claims_accept",
    }
    reviewer = Principal("rev", "agent", ("*",), may_review=True, toolsets=("default", "review"))
    assert await listed(log, reviewer) == DEFAULT_TOOLS | REVIEW_TOOLS
    admin = Principal("ops", "admin", ("*",), toolsets=("all",))
    assert await listed(log, admin) == EVERY_TOOL
    assert await listed(log, msgspec.structs.replace(admin, toolsets=("claims",))) == CLAIMS_TOOLS
    assert (
        await listed(log, msgspec.structs.replace(admin, toolsets=("claims", "uninstalled-pack")))
        == CLAIMS_TOOLS
    )
    assert (
        await listed(log, Principal("ops", "admin", ("*",)), "default,admin") == DEFAULT_TOOLS | ADMIN_TOOLS
    )


async def test_a_tool_outside_the_callers_toolsets_is_refused_saying_how_to_enable_it(log: EventLog) -> None:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1))
    agent = Principal("bot", "agent", ("*",))
    async with Client(EventloomMCP(backend, Token(agent))) as client:
        call = tool_caller(client)
        hidden = await failure(call, "claims_about", {"entity": "Alice"})
        assert hidden.code == "unknown_tool"
        assert "toolset 'claims'" in hidden.error["message"]
        assert "EVENTLOOM_MCP_TOOLSETS" in hidden.error["remediation"]
        admin_only = await failure(call, "memory_replay", {"session": "s"})
        assert admin_only.code == "forbidden" and "admin" in admin_only.error["message"]
        review_only = await failure(
            call,
            "memory_consolidation_review",
            {"candidate_id": "c", "verdict": "accepted", "rationale": "r"},
        )
        assert review_only.code == "forbidden" and "review rights" in review_only.error["message"]
        nothing = await failure(call, "memory_forget", {})
        assert (
            nothing.code == "unknown_tool"
            and nothing.error["message"] == "name: no tool named 'memory_forget'"
        )


async def test_the_servers_toolsets_are_checked_naming_the_setting(log: EventLog) -> None:
    backend = Backend(log=log, memory=MemoryClient(log.client))
    with pytest.raises(
        ValueError, match=r"^EVENTLOOM_MCP_TOOLSETS: no toolset named 'claim'; the toolsets are "
    ):
        EventloomMCP(backend, Token(Principal("x", "agent", ("*",))), "default,claim")
    with pytest.raises(ValueError, match=r"^EVENTLOOM_MCP_TOOLSETS: expected toolset names"):
        EventloomMCP(backend, Token(Principal("x", "agent", ("*",))), " , ")


def test_tokens_carry_their_toolsets_and_bad_names_are_refused(settings: Settings) -> None:
    added = run_cli(
        settings, "tokens", "add", "ci", "--session", "ci-*", "--toolsets", "default,claims", "--json"
    )
    assert added.returncode == 0, added.stderr
    token = json.loads(added.stdout)["token"]
    principal = TokenBook(settings.tokens_file).principal(token)
    assert principal is not None and principal.toolsets == ("claims", "default")
    refused = run_cli(settings, "tokens", "add", "ci2", "--session", "x", "--toolsets", "default,claim")
    assert refused.returncode == 2 and "--toolsets: no toolset named 'claim'" in refused.stderr
    every = add_token(settings.tokens_file, "ops", "admin", ["*"], toolsets=["all"])
    assert TokenBook(settings.tokens_file).principal(every) is not None
    listing = json.loads(run_cli(settings, "tokens", "list", "--json").stdout)
    assert {entry["name"]: entry["toolsets"] for entry in listing} == {
        "ci": ["claims", "default"],
        "ops": ["all"],
    }


def test_descriptions_are_plain_and_every_default_tool_shows_an_example() -> None:
    for surface in toolset_surfaces():
        for tool in surface.tools:
            description: str = tool["description"]
            assert description and "  " not in description and "\n " not in description, tool["name"]
            assert not schema_titles(tool["inputSchema"]), tool["name"]
            if surface.name == "default":
                assert "Example: {" in description, tool["name"]


def schema_titles(schema: Any) -> list[str]:
    """The generated `title`s left in a schema (a property may be named `title`: that one is no title)."""
    if isinstance(schema, list):
        return [title for item in schema for title in schema_titles(item)]
    if not isinstance(schema, dict):
        return []
    found = [str(schema["title"])] if "title" in schema else []
    for key, value in schema.items():
        inner = list(value.values()) if key in ("properties", "$defs") else [value]
        found += [title for item in inner for title in schema_titles(item)]
    return found


def _between_markers(text: str, name: str) -> str:
    found = re.search(rf"<!-- {name}:begin -->\n(.*?)\n<!-- {name}:end -->", text, re.S)
    assert found, f"the markers <!-- {name}:begin/end --> are missing"
    return found.group(1)


def test_the_docs_list_the_tools_the_server_serves() -> None:
    surfaces = toolset_surfaces()
    mcp_doc = (REPO / "docs" / "mcp.md").read_text()
    assert _between_markers(mcp_doc, "tools") == markdown_table(surfaces), (
        "run `eventloom toolsets --markdown`"
    )
    default = next(surface for surface in surfaces if surface.name == "default")
    names = [tool["name"] for tool in default.tools]
    counted: dict[str, Any] = {
        "README.md": (REPO / "README.md").read_text(),
        "docs/mcp.md": mcp_doc,
        "docs/cli.md": (REPO / "docs" / "cli.md").read_text(),
    }
    for path, text in counted.items():
        said = _between_markers(text, "default-tools")
        assert said == f"{len(names)} tools: " + ", ".join(f"`{name}`" for name in names), path
