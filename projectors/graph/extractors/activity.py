"""Extraction of what agent hooks observe: checkpoints, commands, file edits, tool calls, turns.

Commands, tools and files are stable entities (their identity does not change per call); what varies per
call lives on the event's spine summary. Each of these events becomes a task observation only when it
names its task explicitly (`task_id` or `taskId`).
"""

from __future__ import annotations

from typing import Final

from eventloom.schemas.catalogue import (
    AccessRefused,
    CommandCompleted,
    FileEditApplied,
    HookCheckpoint,
    ToolCallCompleted,
    TranscriptTurn,
)
from projectors.graph.extraction import Extraction, Extractor, clip, compact, typed

COMMAND_NAME_LENGTH: Final = 256


def hook_checkpoint(x: Extraction, p: HookCheckpoint) -> None:
    x.entity(p.name, "checkpoint", None, {"state": p.state})
    x.observe(p.effective_task_id, "HAS_CHECKPOINT")
    x.summary = f"checkpoint {p.name}"


def command_completed(x: Extraction, p: CommandCompleted) -> None:
    name = clip(p.command, COMMAND_NAME_LENGTH)
    x.entity(name, "command", None, compact({"cwd": p.cwd}))
    x.observe(p.effective_task_id, "OBSERVED_COMMAND")
    x.summary = f"command exited {p.exit_code}: {name}"


def file_edit_applied(x: Extraction, p: FileEditApplied) -> None:
    x.observe(p.effective_task_id, "OBSERVED_FILE_EDIT")
    kind = p.change_kind or "modify"
    x.summary = f"file {kind}: {p.path}"
    if kind == "delete":
        x.cite(p.path, line_start=p.line_start, line_end=p.line_end, checksum=p.checksum)
        x.invalidate_entity(p.path, "file", x.ts, "deleted")
        return
    me = x.entity(p.path, "file", None, compact({"checksum": p.checksum, "previous_path": p.previous_path}))
    x.cite(p.path, line_start=p.line_start, line_end=p.line_end, checksum=p.checksum, by=me)
    if kind == "rename" and p.previous_path and p.previous_path != p.path:
        x.invalidate_entity(p.previous_path, "file", x.ts, f"renamed to {p.path}")
        x.summary = f"file renamed: {p.previous_path} -> {p.path}"


def tool_call_completed(x: Extraction, p: ToolCallCompleted) -> None:
    x.entity(p.tool, "tool")
    x.observe(p.effective_task_id, "OBSERVED_TOOL_CALL")
    outcome = "ok" if p.ok else f"failed{': ' + p.error if p.error else ''}"
    x.summary = f"tool {p.tool} {outcome}"


def access_refused(x: Extraction, p: AccessRefused) -> None:
    """The gateway's audit of refused callers: on the spine only (the audit session is nobody's memory)."""
    x.summary = f"refused {p.count} x {p.status} {p.reason} from {p.source}"


def transcript_turn(x: Extraction, p: TranscriptTurn) -> None:
    if p.speaker:
        x.entity(p.speaker, "person")
    x.summary = f"{p.speaker or p.role}: {p.text}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "hook.checkpoint": typed(HookCheckpoint, hook_checkpoint),
    "command.completed": typed(CommandCompleted, command_completed),
    "file.edit.applied": typed(FileEditApplied, file_edit_applied),
    "tool.call.completed": typed(ToolCallCompleted, tool_call_completed),
    "access.refused": typed(AccessRefused, access_refused),
    "transcript.turn": typed(TranscriptTurn, transcript_turn),
}
