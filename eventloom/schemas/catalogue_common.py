"""Building blocks shared by the built-in payload schemas: constrained field types and small mixins.

Every payload Struct is `kw_only` and does *not* forbid unknown fields, so a newer producer may add keys an
older consumer ignores. Constraints live in `typing.Annotated[..., msgspec.Meta(...)]` aliases so the error
`validate_payload` raises names the exact field (e.g. `payload.entities[0].entity_type`).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal, TypeAlias

import msgspec
from msgspec import Meta

SNAKE_CASE: Final = r"^[a-z][a-z0-9_]*$"
EVENT_HASH: Final = r"^[0-9a-f]{64}$"
RFC3339: Final = r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$"

Id: TypeAlias = Annotated[str, Meta(min_length=1, max_length=256)]
"""An identifier chosen by the producer (task id, goal id, edge id ...)."""
Name: TypeAlias = Annotated[str, Meta(min_length=1, max_length=512)]
"""A human-readable, non-empty name (agent, entity, tool, symbol ...)."""
Title: TypeAlias = Annotated[str, Meta(min_length=1, max_length=2_000)]
"""A one-line, non-empty headline."""
Text: TypeAlias = Annotated[str, Meta(min_length=1)]
"""Required, non-empty free text; the envelope's 1 MiB payload limit bounds it."""
Path: TypeAlias = Annotated[str, Meta(min_length=1, max_length=4_096)]
"""A file path or URI."""
Checksum: TypeAlias = Annotated[str, Meta(min_length=1, max_length=256)]
"""A content checksum, conventionally `sha256:<hex>`."""
SnakeCase: TypeAlias = Annotated[str, Meta(pattern=SNAKE_CASE, max_length=128)]
"""Strict snake_case (`^[a-z][a-z0-9_]*$`): entity and relation types become graph labels."""
Tag: TypeAlias = Annotated[str, Meta(min_length=1, max_length=128)]
Confidence: TypeAlias = Annotated[float, Meta(ge=0, le=1)]
Seq: TypeAlias = Annotated[int, Meta(ge=1)]
"""A 1-based event sequence number within a session."""
SESSION: Final = r"^[A-Za-z0-9_-]{1,128}$"
Session: TypeAlias = Annotated[str, Meta(pattern=SESSION)]
"""A session name (`eventloom.event.SESSION_PATTERN`)."""
EventHash: TypeAlias = Annotated[str, Meta(pattern=EVENT_HASH)]
"""The 64-hex sha256 `hash` of an event."""
Timestamp: TypeAlias = Annotated[str, Meta(pattern=RFC3339)]
"""An RFC 3339 timestamp, e.g. `2025-05-01T12:00:00.000000Z`."""
LineNo: TypeAlias = Annotated[int, Meta(ge=1)]
"""A 1-based line number."""
Count: TypeAlias = Annotated[int, Meta(ge=0)]
DurationMs: TypeAlias = Annotated[float, Meta(ge=0)]
Taxonomy: TypeAlias = Literal["caused", "enabled", "blocked", "prevented", "regressed", "fixed", "explained"]
"""The kinds of causal link `causal.edge.generated` and `outcome.explained` speak of."""


class Payload(msgspec.Struct, kw_only=True):
    """Base of every payload and nested payload part: keyword-only, extra keys allowed.

    msgspec does not inherit `kw_only`, so every subclass repeats `kw_only=True`.
    """


class TaskRef(Payload, kw_only=True):
    """Mixin for events that may belong to a task: accepts `task_id` and the camelCase `taskId`."""

    task_id: Id | None = None
    task_id_camel: Id | None = msgspec.field(default=None, name="taskId")

    def __post_init__(self) -> None:
        check_task_ids(self)

    @property
    def effective_task_id(self) -> str | None:
        """The task this event belongs to, whichever spelling the producer used."""
        return self.task_id if self.task_id is not None else self.task_id_camel


def check_task_ids(ref: TaskRef) -> None:
    if ref.task_id is not None and ref.task_id_camel is not None and ref.task_id != ref.task_id_camel:
        raise ValueError("`task_id` and `taskId` disagree; send one of them")


def check_line_range(start: int | None, end: int | None) -> None:
    """A line range must not run backwards."""
    if start is not None and end is not None and end < start:
        raise ValueError(f"`line_end` ({end}) is before `line_start` ({start})")


class Evidence(Payload, kw_only=True):
    """One piece of evidence for an inferred or causal claim: an event, a citation, a quote.

    An item with both `event_seq` and `event_hash` cites an event: of `session`, or of the citing event's own
    session when `session` is absent. Consumers check such citations against the log (`eventloom.citations`).
    """

    session: Session | None = None
    event_seq: Seq | None = None
    event_hash: EventHash | None = None
    citation: Annotated[str, Meta(min_length=1, max_length=4_096)] | None = None
    quote: str | None = None

    def __post_init__(self) -> None:
        if self.event_seq is None and self.event_hash is None and not self.citation and not self.quote:
            raise ValueError("evidence needs at least one of `event_seq`, `event_hash`, `citation`, `quote`")

    @property
    def cites_event(self) -> bool:
        return self.event_seq is not None and self.event_hash is not None


class SourceEvent(Payload, kw_only=True):
    """One cited event, named exactly: its session, its seq and its hash."""

    session: Session
    seq: Seq
    hash: EventHash


class SubjectRef(Payload, kw_only=True):
    """An entity a decision, an outcome or a derived edge is about: by name and type."""

    name: Name
    entity_type: SnakeCase
