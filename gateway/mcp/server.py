"""The Eventloom MCP server: the tools, and around every call who is calling, what they may touch, a
structured error when it fails, and a `tool.call.completed` audit event in the log.

The session scope is enforced here, on the server, for every tool (reads included), twice: a call's
`session` argument must match one of the caller's patterns (a call without one, a question across
sessions, needs a caller who may touch every session, unless the tool's rows carry their citations), and
the answer is cut to the rows of sessions the caller may touch (`gateway.access.scope`). Arguments are checked
strictly against each tool's input schema: an argument the tool does not take, or a value of the wrong
type (`"1"` for an integer), is refused naming it, never dropped or coerced.

Plug-in packs add tools through the entry point group `eventloom.mcp_tools`: each entry point is a
`register(server, backend)` called after the built-in tools (in entry point name order), and the tools it
registers get the same authorization (a `session` argument scopes a call to it), audit and structured
errors as the built-ins. A plug-in that fails to load is left out, with a warning in the server log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any, Final, Protocol, cast

import msgspec
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent

from eventloom.errors import EventValidationError
from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from gateway import __version__
from gateway.access.backend import Backend
from gateway.access.tokens import LOCAL_OPERATOR, Principal, TokenBook, bearer_token
from gateway.consolidation import needs_review_rights
from gateway.mcp.caller import Caller, calling_as, finished_calling
from gateway.mcp.failures import ToolFailure, failure_of
from gateway.mcp.own_writes import OwnWrites, written_position
from gateway.mcp.schemas import plain_description, strict_arguments
from gateway.mcp.scope import rows_scoped, scoped_answer
from gateway.mcp.tools_causal import register_causal_tools
from gateway.mcp.tools_consolidation import REVIEW_TOOLS, register_consolidation_tools
from gateway.mcp.tools_context import register_context_tools
from gateway.mcp.tools_log import ADMIN_TOOLS, register_log_tools
from gateway.mcp.tools_memory import register_memory_tools
from gateway.mcp.tools_types import register_type_tools
from gateway.mcp.toolsets import (
    DEFAULT_TOOLSET,
    ToolAccess,
    catalogue_of,
    in_toolset,
    parse_toolsets,
    tools_need,
)

log = logging.getLogger(__name__)
TOOLS_GROUP: Final = "eventloom.mcp_tools"
_ARGUMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_.-]")
AUDITED_STATEMENT_CHARS: Final = 2000
"""The Cypher of a graph query is kept in its audit event up to here (what was read, or tried)."""
INSTRUCTIONS: Final = (
    "Eventloom is this agent's event-sourced memory. Append what happens (memory_append: goals, tasks, "
    "decisions, observations, facts), ask with memory_checkout or context_assemble before answering, and "
    "cite the eventloom:// URIs it returns. Inferred and causal context is never authoritative."
)


class Authenticator(Protocol):
    """Who is calling, from the request's headers (None on stdio); None when nobody valid is."""

    async def caller(self, headers: Mapping[str, str] | None) -> Caller | None: ...


class LocalOperator:
    """stdio: the caller is the user who started the server on their own data dir."""

    async def caller(self, headers: Mapping[str, str] | None) -> Caller | None:
        return Caller(LOCAL_OPERATOR, "stdio")


class BearerTokens:
    """HTTP: the caller is whoever holds a token of the tokens file (checked again for every call)."""

    def __init__(self, book: TokenBook) -> None:
        self.book = book

    async def caller(self, headers: Mapping[str, str] | None) -> Caller | None:
        token = bearer_token((headers or {}).get("authorization"))
        if token is None:
            return None
        principal = await asyncio.to_thread(self.book.principal, token)
        return Caller(principal, "http") if principal else None


class EventloomMCP(MCPServer):
    """`toolsets` (default: the settings' `EVENTLOOM_MCP_TOOLSETS`) are served to callers whose token names
    none; every tool is registered, and each caller sees and may call those of its toolsets
    (`gateway.mcp.toolsets`)."""

    def __init__(self, backend: Backend, authenticator: Authenticator, toolsets: str | None = None) -> None:
        super().__init__(
            "eventloom",
            title="Eventloom memory",
            instructions=INSTRUCTIONS,
            version=__version__,
            log_level="WARNING",
        )
        self.backend = backend
        self.authenticator = authenticator
        register_builtin_tools(self, backend)
        register_plugin_tools(self, backend)
        catalogue = catalogue_of(self)
        if toolsets is None:
            toolsets = backend.settings.mcp_toolsets if backend is not None else DEFAULT_TOOLSET
        chosen = parse_toolsets(toolsets, catalogue.toolsets, "EVENTLOOM_MCP_TOOLSETS")
        self.access = ToolAccess(catalogue, chosen)
        self.own_writes = OwnWrites()
        self.tool_names = frozenset(tool.name for tool in self._tool_manager.list_tools())
        self.rows_scoped = rows_scoped(self)
        self.arguments_of: dict[str, frozenset[str]] = {}
        for tool in self._tool_manager.list_tools():
            strict_arguments(tool)
            tool.description = plain_description(tool.description or "")
            self.arguments_of[tool.name] = frozenset(tool.parameters.get("properties", {}))

    async def _handle_list_tools(
        self, ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        """Only the tools of the caller's toolsets that it may use; nobody valid calling sees none."""
        context = Context(request_context=ctx, mcp_server=self)
        caller = await self.authenticator.caller(_headers(context))
        visible = self.access.visible(caller.principal) if caller is not None else frozenset()
        return ListToolsResult(tools=[tool for tool in await self.list_tools() if tool.name in visible])

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        started = time.perf_counter()
        caller = await self.authenticator.caller(_headers(context))
        if caller is None:
            return _error(ToolFailure("unauthorized", "authorization: no valid bearer token"))
        last_write = self.own_writes.latest(caller.principal.name, None)
        token = calling_as(msgspec.structs.replace(caller, last_write=last_write))
        failure: ToolFailure | None = None
        result: Any = None
        try:
            self._authorize(caller, name, arguments)
            asked = self._after_own_writes(caller, name, arguments)
            result = await super().call_tool(name, asked, context)
            if not caller.principal.unrestricted:
                result = _scoped(result, caller.principal)
            self._remember_write(caller, result)
        except Exception as exc:
            failure = failure_of(exc.__cause__ if exc.__cause__ is not None else exc)
        finally:
            finished_calling(token)
        await self._audit(caller, name, arguments, failure, time.perf_counter() - started)
        return _error(failure) if failure is not None else result

    def _after_own_writes(self, caller: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A read that takes `after` and was given none waits for the caller's own last write (in the
        session it asks about, else anywhere): an agent reads what it just appended."""
        if "after" not in self.arguments_of[name] or arguments.get("after") is not None:
            return arguments
        session = arguments.get("session")
        latest = self.own_writes.latest(caller.principal.name, session if isinstance(session, str) else None)
        return arguments if latest is None else {**arguments, "after": latest.text}

    def _remember_write(self, caller: Caller, result: Any) -> None:
        if isinstance(result, CallToolResult) and not result.is_error:
            with contextlib.suppress(EventValidationError, ValueError):  # an answer that is no write
                if (position := written_position(result.structured_content)) is not None:
                    self.own_writes.wrote(caller.principal.name, position)

    def _authorize(self, caller: Caller, name: str, arguments: Mapping[str, Any]) -> None:
        principal = caller.principal
        if name not in self.tool_names:
            raise ToolFailure("unknown_tool", f"name: no tool named {name!r}")
        if not self.access.may_use(principal, name):
            right = self.access.catalogue.needs[name]
            raise ToolFailure(
                "forbidden",
                f"{name}: needs {'an admin token' if right == 'admin' else 'review rights'}; "
                f"token {principal.name!r} has none",
            )
        toolset = self.access.catalogue.toolset_of[name]
        if toolset not in self.access.toolsets_for(principal):
            raise ToolFailure(
                "unknown_tool",
                f"name: {name} is in the toolset {toolset!r}, not enabled for token {principal.name!r}",
                f"Use the tools tools/list shows, or ask an operator to enable {toolset!r} "
                "(EVENTLOOM_MCP_TOOLSETS, or `eventloom tokens add --toolsets`).",
            )
        if unknown := sorted(set(arguments) - self.arguments_of[name]):
            taken = ", ".join(sorted(self.arguments_of[name])) or "nothing"
            raise ToolFailure(
                "invalid_input", f"{unknown[0][:64]}: not an argument of {name}, which takes {taken}"
            )
        _authorize_review(principal, name, arguments)
        _authorize_after(principal, arguments.get("after"))
        session = arguments.get("session")
        if session is not None and not isinstance(session, str):
            raise ToolFailure("invalid_input", "session: expected a string")
        if session is None and name in self.rows_scoped:
            return  # the answer is cut to the rows the caller may see (gateway.access.scope)
        if not principal.may_touch(session):
            if session is None:
                raise ToolFailure(
                    "forbidden",
                    f"session: required; token {principal.name!r} may touch only sessions matching "
                    f"{', '.join(principal.sessions)}",
                )
            raise ToolFailure(
                "forbidden", f"session: token {principal.name!r} may not touch session {session!r}"
            )

    async def _audit(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, Any],
        failure: ToolFailure | None,
        elapsed_s: float,
    ) -> None:
        """Argument names only, never values: the log keeps who called what, and how it went."""
        session = arguments.get("session")
        payload: dict[str, Any] = {
            "tool": _TOOL_NAME.sub("_", name)[:128] or "_",
            "ok": failure is None,
            "arguments": sorted(key for key in arguments if _ARGUMENT_NAME.match(key))[:64],
            "status": "ok" if failure is None else failure.code,
            "duration_ms": round(elapsed_s * 1000, 3),
            "principal": caller.principal.name,
            "transport": caller.transport,
        }
        if failure is not None:
            payload["error"] = failure.code
        cypher = arguments.get("cypher")
        if name == "memory_graph_query" and isinstance(cypher, str):
            payload["statement"] = cypher[:AUDITED_STATEMENT_CHARS]
            if failure is not None:
                payload["reason"] = failure.message[:AUDITED_STATEMENT_CHARS]
        if isinstance(session, str) and SESSION_PATTERN.fullmatch(session):
            payload["target_session"] = session
        try:
            await self.backend.log.append(
                self.backend.audit_session,
                "tool.call.completed",
                "eventloom-gateway",
                payload,
                principal=caller.recorded_principal,
            )
        except Exception:  # the caller still gets the answer; the gap shows in the server log
            log.exception("could not append the audit event for %s", payload["tool"])


def register_builtin_tools(server: MCPServer, backend: Backend) -> None:
    """The built-in tools, in their toolsets: `default` for an agent's memory work, `review` for derived
    memory, `admin` for the raw log and graph."""
    register_memory_tools(server, backend)
    register_type_tools(server, backend)
    register_causal_tools(server, backend)
    register_context_tools(server, backend)
    register_log_tools(server, backend)
    register_consolidation_tools(server, backend)
    in_toolset(server, DEFAULT_TOOLSET, *_undeclared(server))
    in_toolset(server, "review", *REVIEW_TOOLS, "memory_consolidation_candidate", "memory_inferred_status")
    in_toolset(server, "admin", *ADMIN_TOOLS)
    tools_need(server, "admin", *ADMIN_TOOLS)
    tools_need(server, "review", *REVIEW_TOOLS)


def register_plugin_tools(server: MCPServer, backend: Backend) -> None:
    """Call the `register(server, backend)` of every installed `eventloom.mcp_tools` entry point; the tools
    it registers (and declares in no toolset itself) form the toolset named after the entry point."""
    for entry in sorted(entry_points(group=TOOLS_GROUP), key=lambda e: e.name):
        try:
            entry.load()(server, backend)
        except Exception:  # a broken plug-in must not take the built-in tools down with it
            log.exception("the MCP tools plug-in %r (%s) was left out", entry.name, entry.value)
        in_toolset(server, entry.name, *_undeclared(server))


def _undeclared(server: MCPServer) -> list[str]:
    declared = catalogue_of(server).toolset_of
    return [tool.name for tool in server._tool_manager.list_tools() if tool.name not in declared]


def installed_toolsets() -> tuple[str, ...]:
    """The toolsets of the tools installed here (built-in and plug-in), without a backend to serve them."""
    return catalogue_of(EventloomMCP(cast(Backend, None), LocalOperator(), DEFAULT_TOOLSET)).toolsets


def _authorize_review(principal: Principal, name: str, arguments: Mapping[str, Any]) -> None:
    """Reviewing derived memory (a verdict, a promotion, its retraction, an accepted edge) needs review
    rights, whether through the review tool or by appending the reviewer's event directly."""
    if principal.reviewer:
        return
    if name in REVIEW_TOOLS:
        raise ToolFailure(
            "forbidden",
            f"{name}: needs review rights; token {principal.name!r} has none (ask for --may-review)",
        )
    event_type = arguments.get("type")
    payload = arguments.get("payload")
    if name == "memory_append" and isinstance(event_type, str) and needs_review_rights(event_type, payload):
        raise ToolFailure(
            "forbidden",
            f"type: appending {event_type} needs review rights; token {principal.name!r} has none",
        )


def _authorize_after(principal: Principal, after: object) -> None:
    """Waiting on a position shows how far the read models got in its session: only in a session the
    caller may touch."""
    try:
        position = Position.parse(after) if isinstance(after, str) else None
    except EventValidationError:
        position = None  # the tool refuses it, naming `after`, once its other arguments are checked
    if position is None:
        return
    if not principal.may_touch(position.session):
        raise ToolFailure(
            "forbidden", f"after: token {principal.name!r} may not touch session {position.session!r}"
        )


def _scoped(result: Any, principal: Principal) -> Any:
    """The tool's answer as a caller limited to some sessions may see it."""
    if not isinstance(result, CallToolResult) or result.is_error:
        return result
    if result.structured_content is None:
        text = "".join(getattr(block, "text", "") for block in result.content)
        scoped_answer(text, principal.may_touch)  # refuses what cites a foreign session
        return result
    kept = scoped_answer(result.structured_content, principal.may_touch)
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(kept, indent=2))], structured_content=kept
    )


def _headers(context: Context[Any, Any] | None) -> Mapping[str, str] | None:
    if context is None:
        return None
    try:
        return context.headers
    except ValueError:  # no request in progress (an in-process call)
        return None


def _error(failure: ToolFailure) -> CallToolResult:
    body = {"error": failure.body()}
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(body))], structured_content=body, is_error=True
    )
