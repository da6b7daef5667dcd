"""Who is making the tool call in progress: set by the server around each call, read by the tools."""

from __future__ import annotations

from contextvars import ContextVar, Token

import msgspec

from eventloom.event import os_principal
from eventloom.position import Position
from gateway.access.tokens import Principal


class Caller(msgspec.Struct, frozen=True):
    principal: Principal
    transport: str  # "stdio" or "http"
    last_write: Position | None = None
    """The caller's newest append through this server, when the call began: what a read that takes no
    `after` (a pack's question) waits for, so the caller reads its own writes."""

    @property
    def actor(self) -> str:
        """The `actor` of events the caller appends without naming one."""
        return f"mcp:{self.principal.name}"

    @property
    def recorded_principal(self) -> str:
        """The envelope's `principal` of what this caller appends: `token:<name>` over HTTP, `os:<user>`
        on stdio (the user who started the server)."""
        if self.transport == "http":
            return f"token:{self.principal.name}"
        return os_principal()


_current: ContextVar[Caller] = ContextVar("eventloom_mcp_caller")


def current_caller() -> Caller:
    return _current.get()


def calling_as(caller: Caller) -> Token[Caller]:
    """Make `caller` current for this task; returns the token `finished_calling` needs."""
    return _current.set(caller)


def finished_calling(token: Token[Caller]) -> None:
    _current.reset(token)
