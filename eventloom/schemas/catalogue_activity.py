"""Payload schemas of what an agent's tools observe (hooks, commands, file edits, tool calls, turns), and the
gateway's own audit of refused callers.

These events usually come from agent hooks, some of which spell the task id `taskId`; every one that can
belong to a task accepts both spellings (see `TaskRef`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from eventloom.schemas.catalogue_common import (
    Checksum,
    Count,
    DurationMs,
    Id,
    LineNo,
    Name,
    Path,
    Payload,
    TaskRef,
    Text,
    Timestamp,
    check_line_range,
)


class HookCheckpoint(TaskRef, kw_only=True):
    """`hook.checkpoint`: an agent hook saved its state at a named point."""

    name: Name
    state: dict[str, Any]


class CommandCompleted(TaskRef, kw_only=True):
    """`command.completed`: a shell command ran to completion (successfully or not)."""

    command: Text
    exit_code: int
    output: str | None = None
    duration_ms: DurationMs | None = None
    cwd: Path | None = None


class FileEditApplied(TaskRef, kw_only=True):
    """`file.edit.applied`: a file was created, changed, renamed or deleted."""

    path: Path
    change_kind: Literal["create", "modify", "delete", "rename"] | None = None
    previous_path: Path | None = None
    diff: str | None = None
    line_start: LineNo | None = None
    line_end: LineNo | None = None
    checksum: Checksum | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_line_range(self.line_start, self.line_end)


class ToolCallCompleted(TaskRef, kw_only=True):
    """`tool.call.completed`: an agent tool call returned. Only argument *names* are kept, never values,
    except the Cypher of an (admin) graph query, which is the evidence of what was read or attempted."""

    tool: Name
    ok: bool
    arguments: list[Name] = msgspec.field(default_factory=list)
    status: Name | None = None
    duration_ms: DurationMs | None = None
    error: str | None = None
    statement: str | None = None
    reason: str | None = None


class AccessRefused(Payload, kw_only=True):
    """`access.refused`: the HTTP gateway refused callers (401, 403, 429); one event per window of refusals of
    one (status, reason, source, principal). Never a token, a cookie, a query string or a body."""

    status: Annotated[int, Meta(ge=400, le=599)]
    reason: Name
    source: Name
    count: Count
    since: Timestamp
    window_s: DurationMs
    requests: list[str] = msgspec.field(default_factory=list)
    attempts: list[str] = msgspec.field(default_factory=list)
    principal: Name | None = None


class TranscriptTurn(Payload, kw_only=True):
    """`transcript.turn`: one turn of a conversation, verbatim."""

    role: Literal["user", "assistant", "system", "tool"]
    text: str
    turn_id: Id | None = None
    dia_id: Id | None = None
    speaker: Name | None = None
