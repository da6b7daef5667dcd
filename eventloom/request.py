"""`AppendRequest`: what a caller asks to append, validated field by field before anything is written."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event, principal_problem
from eventloom.schemas.registry import Origin
from eventloom.validation import (
    validate_actor,
    validate_caused_by,
    validate_payload_value,
    validate_session,
    validate_type,
)

MAX_IDEMPOTENCY_KEY: Final = 256
REPEATED_FIELDS: Final = ("type", "actor", "payload", "caused_by", "principal")
"""What a repeat under an idempotency key must repeat: every field the event records. `expected_seq` is
not one: a retry of an append that landed finds the session past it (at its own event), and is a repeat."""
_sorted_json = msgspec.json.Encoder(order="sorted")


class AppendRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller asks to append; the appender adds seq, ts, prev_hash, hash and signature."""

    session: str
    type: str
    actor: str
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    caused_by: list[str] = msgspec.field(default_factory=list)
    idempotency_key: str | None = None
    expected_seq: int | None = None
    """Append only if the session's newest event is this seq (0: only if the session is new)."""
    principal: str | None = None
    """Who was authenticated for this append (`token:<name>`, `os:<user>`); recorded in the envelope."""

    def differences(self, event: Event) -> list[str]:
        """The fields in which this request is not the one that appended `event` (none: a repeat)."""
        return [
            name
            for name in REPEATED_FIELDS
            if _sorted_json.encode(getattr(self, name)) != _sorted_json.encode(getattr(event, name))
        ]

    def validated(self) -> AppendRequest:
        validate_session(self.session)
        validate_type(self.type)
        validate_actor(self.actor)
        validate_caused_by(self.caused_by)
        validate_payload_value(self.type, self.payload, Origin(self.session, self.actor))
        key = self.idempotency_key
        if key is not None and (not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable()):
            raise EventValidationError(
                "idempotency_key", f"must be 1-{MAX_IDEMPOTENCY_KEY} printable characters"
            )
        if self.principal is not None and (problem := principal_problem(self.principal)) is not None:
            raise EventValidationError("principal", problem)
        expected = self.expected_seq
        if expected is not None and (type(expected) is not int or expected < 0):
            raise EventValidationError("expected_seq", "must be an integer >= 0 (0: the session must be new)")
        return self
