"""`Position`: where an appended event sits in the log, and its text form `SESSION/SEQ`.

A read given a position (`after`) answers only once the read models it uses have applied that event, so a
caller reads its own writes. The text form is what the CLI (`--after`), the web API (`?after=`) and the MCP
tools accept; this module's `Position.parse` is their one parser.
"""

from __future__ import annotations

from typing import Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import SESSION_PATTERN, Event

SEPARATOR: Final = "/"
TEXT_FORM: Final = "SESSION/SEQ (a session name, '/', a seq of 1 or more), e.g. s1/42"


class Position(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An event's place: its session and seq, and the JetStream stream sequence when the appender knows it
    (a position parsed from text has none: reads need only the session and seq)."""

    session: str
    seq: int
    stream_seq: int | None = None

    def __post_init__(self) -> None:
        # raised while decoding too: msgspec reports it as a ValidationError at the field's path
        if not SESSION_PATTERN.fullmatch(self.session):
            raise ValueError(f"session: must match {SESSION_PATTERN.pattern}, got {self.session!r}")
        if self.seq < 1:
            raise ValueError(f"seq: must be 1 or more, got {self.seq}")

    @classmethod
    def parse(cls, text: str, field: str = "after") -> Position:
        """`SESSION/SEQ` as a position; `EventValidationError` naming `field` when it is not one."""
        session, separator, seq = text.strip().rpartition(SEPARATOR)
        if not separator or not seq.isdecimal() or not SESSION_PATTERN.fullmatch(session):
            raise EventValidationError(field, f"expected {TEXT_FORM}, got {text!r}")
        if int(seq) < 1:
            raise EventValidationError(field, f"the seq must be 1 or more, got {text!r}")
        return cls(session=session, seq=int(seq))

    @classmethod
    def of(cls, event: Event, stream_seq: int | None = None) -> Position:
        return cls(session=event.session, seq=event.seq, stream_seq=stream_seq)

    @property
    def text(self) -> str:
        """The text form, `SESSION/SEQ`, that `parse` reads back."""
        return f"{self.session}{SEPARATOR}{self.seq}"

    def __str__(self) -> str:
        return self.text


class Appended(msgspec.Struct, frozen=True):
    """An event the stream stored, with its position (what `EventLog.append_positioned` returns)."""

    event: Event
    position: Position
