"""The one rule for whether an event may follow another: seq, prev_hash, hash, signature."""

from __future__ import annotations

from dataclasses import dataclass

from eventloom.errors import SignatureError
from eventloom.event import Event, compute_hash
from eventloom.keys import Keyring


@dataclass(frozen=True)
class ChainTip:
    """The last verified event of a session (seq 0 and no hash before the first)."""

    seq: int = 0
    hash: str | None = None


GENESIS = ChainTip()


class ChainBreak(Exception):
    """An event cannot follow the tip; `seq` is where the chain breaks and `reason` says why."""

    def __init__(self, session: str, seq: int, reason: str) -> None:
        super().__init__(f"session {session} seq {seq}: {reason}")
        self.session = session
        self.seq = seq
        self.reason = reason


def check_next(event: Event, tip: ChainTip, keyring: Keyring) -> ChainTip:
    """Verify `event` as the successor of `tip`; return the new tip or raise ChainBreak."""
    expected = tip.seq + 1
    if event.seq != expected:
        raise ChainBreak(event.session, expected, f"expected seq {expected}, found seq {event.seq}")
    if event.prev_hash != tip.hash:
        raise ChainBreak(
            event.session,
            event.seq,
            f"prev_hash {event.prev_hash} does not match hash {tip.hash} of seq {tip.seq}",
        )
    check_self(event, keyring)
    return ChainTip(event.seq, event.hash)


def check_self(event: Event, keyring: Keyring) -> None:
    """Hash and signature of one event, without looking at its neighbours."""
    actual = compute_hash(event)
    if actual != event.hash:
        raise ChainBreak(event.session, event.seq, f"hash {event.hash} does not match content hash {actual}")
    try:
        keyring.verify(event.key_id, event.hash, event.sig)
    except SignatureError as exc:
        raise ChainBreak(event.session, event.seq, str(exc)) from None
