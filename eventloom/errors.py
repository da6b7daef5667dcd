"""The errors Eventloom raises. Every one carries a message a user can act on."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eventloom.event import Event


class EventloomError(Exception):
    """Base class of every error this package raises on purpose."""


class EventValidationError(EventloomError, ValueError):
    """An event or payload was rejected; `field` names the offending field (dotted path)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class SignatureError(EventloomError):
    """A signature did not verify, or was made by a key that is not trusted."""


class UnknownKeyError(SignatureError):
    """The event names a key id that is not in the keyring."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"key_id: signing key {key_id} is not in the trusted keyring")
        self.key_id = key_id


class ConcurrencyError(EventloomError):
    """Another writer kept winning the race for a session's tail; the append was not written."""


class WrongExpectedSeqError(ConcurrencyError):
    """The caller said "only if the session is at seq N" and it is not: nothing was appended."""

    def __init__(self, session: str, expected: int, actual: int) -> None:
        where = "new (no events)" if expected == 0 else f"at seq {expected}"
        super().__init__(
            f"expected_seq: session {session} was expected {where} but is at seq {actual}; nothing was "
            "appended (read the session again and decide)"
        )
        self.session = session
        self.expected = expected
        self.actual = actual


class IdempotencyConflictError(ConcurrencyError):
    """An idempotency key came back with another request than the one it appended: nothing was appended.

    As payment APIs and event stores treat a key: it names one request, and a repeat of that request gets
    the original event back; a different request under the same key is the caller's mistake, not a repeat
    (Stripe: "a different request with the same key is an error")."""

    def __init__(self, recorded: Event, fields: list[str]) -> None:
        super().__init__(
            f"idempotency_key: session {recorded.session} already has an event under this key (seq "
            f"{recorded.seq}) from another request (differing in {', '.join(fields)}); nothing was appended "
            "(a new request needs a new key)"
        )
        self.recorded = recorded
        self.fields = fields


class UntrustedTailError(EventloomError):
    """A session's newest event is signed by a key this node does not trust: appending would fork it."""

    def __init__(self, session: str, seq: int, reason: str) -> None:
        super().__init__(
            f"session {session}: its newest event (seq {seq}) is not signed by a trusted "
            f"key ({reason}); trust the signer's public key (`eventloom keys trust`) or, if it is a forgery, "
            "clear it once reviewed (`eventloom quarantine clear`: appends step over it), then append again"
        )
        self.session = session
        self.seq = seq


class BusUnavailableError(EventloomError):
    """NATS did not answer in time; the append may or may not have been stored (retry with a key)."""


class NodeNotRunningError(EventloomError):
    """No NATS server could be reached for this data directory."""


class ReadModelUnavailableError(EventloomError):
    """A read model's store is down (e.g. Neo4j restarting): consumers pause instead of dead-lettering."""


class ReadModelBrokenError(EventloomError):
    """A read model cannot go on at all (e.g. a bulk load that failed half-way): its consumer stops
    instead of retrying or dead-lettering the events that follow."""


class StreamFullError(EventloomError):
    """The event stream is at its size limit and refuses new events (it never drops old ones to make room):
    nothing was appended. The message names the limit and what to do."""
