"""The event types described for an agent: name, one line, payload JSON schema, a valid example.

`describe_event_types` is what the `eventloom types` command prints and what an MCP tool hands an agent that
asks which types it may append; `COMMON_EVENT_TYPES` are the few an agent uses most (for a tool description).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from eventloom.schemas.registry import (
    OPEN_TYPE_PREFIX,
    OPEN_TYPES_VARIABLE,
    example_payload,
    known_event_types,
    legacy_schemas,
    schema_for,
    unknown_type_error,
)

COMMON_EVENT_TYPES: Final = (
    "goal.created",
    "task.proposed",
    "task.completed",
    "decision.made",
    "issue.diagnosed",
    "verification.recorded",
    "memory.fact.asserted",
    "transcript.turn",
)
"""The types an agent appends most: its goals, tasks, decisions, findings, checks, facts and conversation."""

OPEN_EVENT_TYPE_RULE: Final = (
    f"Only known types are accepted. A type starting with `{OPEN_TYPE_PREFIX}` (e.g. "
    f"`{OPEN_TYPE_PREFIX}myteam.note_added`) is open: its payload is stored as any JSON object, without a "
    f"schema. An operator may open more with {OPEN_TYPES_VARIABLE} (comma-separated patterns like `note.*`)."
)

NO_DESCRIPTION: Final = "(not described: its payload schema has no docstring)"
"""The description of a plug-in's type whose payload Struct has no docstring."""
_NOISE: Final = frozenset({"title", "description"})
_NAMED: Final = frozenset({"properties", "$defs"})
_LEADING_NAME = re.compile(r"^`[^`]+`(\s*\([^)]*\))?:\s*")
_SENTENCE_END = re.compile(r"(?<=[^.]\.)\s")  # a full stop, not an ellipsis


class EventTypeInfo(msgspec.Struct, frozen=True, kw_only=True):
    """One event type as an agent needs it to append one."""

    name: str
    description: str
    payload_schema: dict[str, Any]
    """The payload's JSON schema (titles and docstrings dropped; nested shapes under `$defs`)."""
    example: dict[str, Any] | None
    """A payload that validates; None for a plug-in type registered without one."""
    legacy_versions: int = 0
    """How many earlier payload shapes are still read (the design's are also accepted on append; see
    docs/event-types.md)."""


def describe_event_types(names: Sequence[str] | None = None) -> list[EventTypeInfo]:
    """Every known type (or those `names` names, in that order), described for an agent.

    Raises `EventValidationError` on `type`, with the closest known types, for a name that is not known.
    """
    chosen = known_event_types() if names is None else list(names)
    return [_describe(name) for name in chosen]


def _describe(name: str) -> EventTypeInfo:
    schema = schema_for(name)
    if schema is None:
        raise unknown_type_error(name)
    return EventTypeInfo(
        name=name,
        description=one_line(schema.__doc__ or "") or NO_DESCRIPTION,
        payload_schema=compact_schema(schema),
        example=example_payload(name),
        legacy_versions=len(legacy_schemas(name)),
    )


def one_line(docstring: str) -> str:
    """The first sentence of a schema's docstring, without its leading `type.name` (and version note)."""
    paragraph = " ".join(docstring.strip().split("\n\n", 1)[0].split())
    text = _LEADING_NAME.sub("", paragraph)
    return _SENTENCE_END.split(text, maxsplit=1)[0]


def compact_schema(schema: type[msgspec.Struct]) -> dict[str, Any]:
    """`msgspec.json.schema` of a payload Struct, the root inlined, titles and docstrings dropped."""
    full = msgspec.json.schema(schema)
    definitions: dict[str, Any] = _without_noise(full.get("$defs", {}), names=True)
    root_name = str(full["$ref"]).rsplit("/", 1)[-1]
    root: dict[str, Any] = definitions.pop(root_name)
    if definitions:
        root["$defs"] = definitions
    return root


def _without_noise(value: Any, *, names: bool = False) -> Any:
    """`value` without `title` and `description` keywords; `names`: `value` maps names (of properties or
    definitions) to schemas, so its keys are kept whatever they are."""
    if isinstance(value, dict):
        return {
            key: _without_noise(item, names=not names and key in _NAMED)
            for key, item in value.items()
            if names or key not in _NOISE
        }
    if isinstance(value, list):
        return [_without_noise(item) for item in value]
    return value
