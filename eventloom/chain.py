"""The one rule for whether an event may follow another: seq, prev_hash, hash, signature."""

from __future__ import annotations

from dataclasses import dataclass

from eventloom.errors import SignatureError, UnknownKeyError
from eventloom.event import (
    ENVELOPE_VERSION,
    HASH_PATTERN,
    SESSION_PATTERN,
    TIMESTAMP_PATTERN,
    TYPE_PATTERN,
    Event,
    compute_hash,
    principal_problem,
)
from eventloom.keys import Keyring


@dataclass(frozen=True)
class ChainTip:
    """The last verified event of a session (seq 0 and no hash before the first)."""

    seq: int = 0
    hash: str | None = None


GENESIS = ChainTip()


class ChainBreak(Exception):
    """An event cannot follow the tip; `seq` is where the chain breaks and `reason` says why."""

    def __init__(self, session: str, seq: int, reason: str, *, unknown_key: bool = False) -> None:
        super().__init__(f"session {session} seq {seq}: {reason}")
        self.session = session
        self.seq = seq
        self.reason = reason
        self.unknown_key = unknown_key


def envelope_problem(event: Event) -> str | None:
    """What is wrong with the envelope's form, if anything (checked before the costlier crypto)."""
    if event.v != ENVELOPE_VERSION:
        return f"v: unsupported envelope version {event.v}"
    if not SESSION_PATTERN.fullmatch(event.session):
        return "session: not a valid session id"
    if not TYPE_PATTERN.fullmatch(event.type):
        return "type: not a valid event type"
    if not TIMESTAMP_PATTERN.fullmatch(event.ts):
        return "ts: not RFC 3339 UTC with microseconds and Z"
    if event.seq < 1:
        return "seq: must be >= 1"
    if event.prev_hash is not None and not HASH_PATTERN.fullmatch(event.prev_hash):
        return "prev_hash: not a sha256 hex digest"
    if any(not HASH_PATTERN.fullmatch(h) for h in event.caused_by):
        return "caused_by: entries must be sha256 hex digests"
    principal = event.principal
    if principal is not None and (problem := principal_problem(principal)) is not None:
        return f"principal: {problem}"
    return None


def check_next(event: Event, tip: ChainTip, keyring: Keyring) -> ChainTip:
    """Verify `event` as the successor of `tip`; return the new tip or raise ChainBreak."""
    new_tip = check_link(event, tip)
    check_self(event, keyring)
    return new_tip


def check_link(event: Event, tip: ChainTip) -> ChainTip:
    """Only the linkage: seq continuity and prev_hash (for callers that checked the event itself already)."""
    expected = tip.seq + 1
    if event.seq != expected:
        raise ChainBreak(event.session, expected, f"expected seq {expected}, found seq {event.seq}")
    if event.prev_hash != tip.hash:
        raise ChainBreak(
            event.session,
            event.seq,
            f"prev_hash {event.prev_hash} does not match hash {tip.hash} of seq {tip.seq}",
        )
    return ChainTip(event.seq, event.hash)


def self_problem(event: Event, keyring: Keyring | None) -> str | None:
    """Why `event` is not valid on its own (None: it is); without a keyring, its form and hash only."""
    try:
        if keyring is None:
            problem = envelope_problem(event)
            if problem is None and compute_hash(event) != event.hash:
                problem = "its hash does not match its content"
            return problem
        check_self(event, keyring)
    except ChainBreak as exc:
        return exc.reason
    return None


def check_self(event: Event, keyring: Keyring) -> None:
    """Envelope form, hash and signature of one event, without looking at its neighbours."""
    problem = envelope_problem(event)
    if problem is not None:
        raise ChainBreak(event.session, event.seq, problem)
    actual = compute_hash(event)
    if actual != event.hash:
        raise ChainBreak(event.session, event.seq, f"hash {event.hash} does not match content hash {actual}")
    try:
        keyring.verify(event.key_id, event.hash, event.sig)
    except SignatureError as exc:
        unknown = isinstance(exc, UnknownKeyError)
        raise ChainBreak(event.session, event.seq, str(exc), unknown_key=unknown) from None
