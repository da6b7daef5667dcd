"""The argument types the tools share. Their limits appear in each tool's input schema, so a client sees
them before calling, and are checked again on the server."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from readmodels.checkout.model import MAX_TOKEN_BUDGET, MIN_TOKEN_BUDGET
from readmodels.retrieval.model import MAX_DEPTH, MAX_LIMIT, MAX_QUERY_CHARS

MAX_PAYLOAD_BYTES: Final = 1024 * 1024
SESSION_REGEX: Final = SESSION_PATTERN.pattern

Session = Annotated[
    str,
    Field(pattern=SESSION_REGEX, description="The session (1-128 of letters, digits, _ and -)."),
]
SessionFilter = Annotated[
    str | None,
    Field(
        pattern=SESSION_REGEX,
        description="Only this session. Required unless your token may touch every session.",
    ),
]
Question = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="The question, in plain words."),
]
AsOf = Annotated[
    str | None,
    Field(max_length=64, description="What was true at this RFC 3339 time (default: now)."),
]
Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many hits to return.")]
Depth = Annotated[int, Field(ge=0, le=MAX_DEPTH, description="Graph hops to expand from matched entities.")]
Profile = Annotated[
    Literal["balanced", "precision", "recall", "temporal"],
    Field(description="Lane weights and fusion: balanced, precision, recall or temporal."),
]
TokenBudget = Annotated[
    int,
    Field(ge=MIN_TOKEN_BUDGET, le=MAX_TOKEN_BUDGET, description="The most tokens the prompt text may use."),
]
Payload = Annotated[
    dict[str, Any],
    Field(description="The event's payload: a JSON object of at most 1 MiB (see docs/event-types.md)."),
]
After = Annotated[
    str | None,
    Field(
        max_length=160,
        description="Answer once this write (an append's `position`, SESSION/SEQ) is readable. "
        "Default: your own last append.",
    ),
]
Name = Annotated[str, Field(min_length=1, max_length=512)]


def position_after(after: str | None) -> Position | None:
    """An `after` argument as the position a read waits for (`invalid_input` naming `after` if it is none)."""
    return Position.parse(after) if after is not None else None


SnakeCase = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=128)]
EventHash = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class NestedArgument(BaseModel):
    """An object inside a tool's arguments: as strict as the arguments themselves (server.py), so an
    unknown field or a value of the wrong type is refused, naming it, at any depth."""

    model_config = ConfigDict(extra="forbid", strict=True)
