"""The event envelope, its canonical encoding, hash and citation (see docs/eventloom-format.md)."""

from __future__ import annotations

import getpass
import hashlib
import re
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

ENVELOPE_VERSION: Final = 1
SESSION_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
TYPE_PATTERN: Final = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
HASH_PATTERN: Final = re.compile(r"^[0-9a-f]{64}$")
TIMESTAMP_PATTERN: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
PRINCIPAL_PATTERN: Final = re.compile(r"^[a-z]+:[A-Za-z0-9_.@-]{1,128}$")  # <how>:<who>, e.g. token:alice

_canonical = msgspec.json.Encoder(order="sorted")


class Event(msgspec.Struct, frozen=True, forbid_unknown_fields=True, omit_defaults=True):
    """One signed, hash-chained entry of a session's log.

    `principal` is who was authenticated when the event was appended (an MCP token, an OS user), next to
    the `actor` the caller named; absent when the appender was not told (derived events, older events), and
    then not encoded at all, so events without it hash and read exactly as before it existed."""

    v: int
    session: str
    seq: int
    ts: str
    type: str
    actor: str
    payload: dict[str, Any]
    caused_by: list[str]
    prev_hash: str | None
    hash: str
    sig: str
    key_id: str
    principal: str | None = None

    @property
    def citation(self) -> str:
        return citation(self.session, self.seq, self.hash)


class _HashedFields(msgspec.Struct, frozen=True, omit_defaults=True):
    """Every envelope field except hash, sig and key_id: exactly what the hash covers."""

    v: int
    session: str
    seq: int
    ts: str
    type: str
    actor: str
    payload: dict[str, Any]
    caused_by: list[str]
    prev_hash: str | None
    principal: str | None = None


def canonical_bytes(
    *,
    session: str,
    seq: int,
    ts: str,
    type: str,
    actor: str,
    payload: dict[str, Any],
    caused_by: list[str],
    prev_hash: str | None,
    v: int = ENVELOPE_VERSION,
    principal: str | None = None,
) -> bytes:
    """Sorted-key, whitespace-free UTF-8 JSON of the hashed fields."""
    return _canonical.encode(
        _HashedFields(
            v=v,
            session=session,
            seq=seq,
            ts=ts,
            type=type,
            actor=actor,
            payload=payload,
            caused_by=caused_by,
            prev_hash=prev_hash,
            principal=principal,
        )
    )


def compute_hash(event: Event) -> str:
    """The sha256 hex the event's `hash` field must equal."""
    body = canonical_bytes(
        v=event.v,
        session=event.session,
        seq=event.seq,
        ts=event.ts,
        type=event.type,
        actor=event.actor,
        payload=event.payload,
        caused_by=event.caused_by,
        prev_hash=event.prev_hash,
        principal=event.principal,
    )
    return hashlib.sha256(body).hexdigest()


def encode_event(event: Event) -> bytes:
    """The wire and ledger form of a whole event: the same canonical JSON, all fields."""
    return _canonical.encode(event)


_event_decoder = msgspec.json.Decoder(Event)


def decode_event(data: bytes | str) -> Event:
    """Parse one event; raises msgspec.ValidationError / DecodeError naming the bad field."""
    return _event_decoder.decode(data)


def principal_problem(principal: str) -> str | None:
    if not PRINCIPAL_PATTERN.fullmatch(principal):
        return "must be <kind>:<name>, e.g. token:alice or os:ops (letters, digits and _.@- in the name)"
    return None


def os_principal() -> str:
    """`os:<user>`: the principal of what this process's OS user appends directly (CLI, stdio MCP)."""
    user = re.sub(r"[^A-Za-z0-9_.@-]", "_", getpass.getuser())[:128]
    return f"os:{user or 'unknown'}"


def utc_timestamp(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with microseconds and a `Z`, the only timestamp form events carry."""
    moment = (moment or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def citation(session: str, seq: int, event_hash: str) -> str:
    """`eventloom://<session>/events/<seq>#<first 12 hex of hash>`."""
    return f"eventloom://{session}/events/{seq}#{event_hash[:12]}"
