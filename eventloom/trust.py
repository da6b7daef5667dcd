"""`EventVerifier`: what every consumer does before it believes an event it read from the bus.

Anyone who can publish on the stream's subjects can put bytes there; only the appender's key makes them an
event. A consumer applies an event only if its hash matches its content, its signature verifies against the
keyring, and it links to the session's previous event (seq + 1, `prev_hash`). The ledger mirror has done this
from the start; projectors and producers do it here, with the same checks (`eventloom.chain`). They also
check what an event cites (`eventloom.citations`): derived knowledge naming an event that does not exist, or
one with another hash, is refused like a forgery.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import msgspec
from nats.aio.client import Client

from eventloom.bus.stream import StreamLayout
from eventloom.chain import GENESIS, ChainBreak, ChainTip, check_link, self_problem
from eventloom.checks import EventChecker
from eventloom.citations import CitationChecker, KnownHashes
from eventloom.errors import EventloomError
from eventloom.event import Event
from eventloom.keys import Keyring, KeyStore
from eventloom.tail import event_by_seq

log = logging.getLogger(__name__)

UNVERIFIED = "unverified"
"""How a refused event's dead letter starts: `eventloom dlq list` and `verify` show why it was refused."""


class EventVerifier:
    """Checks batches of events in stream order; remembers each session's last verified event."""

    def __init__(
        self, keys: KeyStore, client: Client, layout: StreamLayout, known: KnownHashes | None = None
    ) -> None:
        """`known`: the hashes this process has verified, shared by its consumers (one of its own if None)."""
        self._keys = keys
        self._client = client
        self._layout = layout
        self._keyring = Keyring()
        self._tips: dict[str, ChainTip] = {}
        self._checker: EventChecker | None = None
        self._citations = CitationChecker(self._cited_hash, known)

    async def open(self) -> None:
        self._keyring = await asyncio.to_thread(self._keys.load_keyring)
        self._checker = EventChecker(niceness=0)  # a thread per core: libsodium releases the GIL

    def close(self) -> None:
        if self._checker is not None:
            self._checker.close()
            self._checker = None

    async def verify(self, events: Sequence[Event]) -> list[str | None]:
        """For each event (in stream order), None when it may be applied, else why it may not."""
        if self._checker is None:
            raise EventloomError("the event verifier is not open")
        checker = self._checker
        own = await asyncio.to_thread(checker.check_all, list(events), self._keyring)
        if any(b is not None and b.unknown_key for b in own):
            self._keyring = await asyncio.to_thread(self._keys.load_keyring)  # trusted since?
            own = await asyncio.to_thread(checker.check_all, list(events), self._keyring)
        reasons: list[str | None] = []
        for event, broken in zip(events, own, strict=True):
            if broken is not None:
                reasons.append(f"{UNVERIFIED}: {broken.reason}")
                continue
            reason = await self._link(event)
            if reason is None:
                reason = await self._citations.problem(event)
            if reason is None:
                self._citations.saw(event)
            reasons.append(reason)
        return reasons

    async def _cited_hash(self, session: str, seq: int) -> str | None:
        stored = await event_by_seq(self._client, self._layout, session, seq, self._own_problem)
        return None if stored is None else stored.event.hash

    async def _link(self, event: Event) -> str | None:
        tip = self._tips.get(event.session)
        if tip is None or event.seq != tip.seq + 1:  # first sight, a redelivery, or past a dead letter
            anchored = await self._anchor(event)
            if isinstance(anchored, str):
                return anchored
            tip = anchored
        if tip is not None:
            try:
                check_link(event, tip)
            except ChainBreak as exc:
                return f"{UNVERIFIED}: {exc.reason}"
        self._tips[event.session] = ChainTip(event.seq, event.hash)
        return None

    async def _anchor(self, event: Event) -> ChainTip | str | None:
        """The verified predecessor of `event`; why there is none that may be trusted; or None when it could
        not be read (the event's own hash and signature were checked; its link is then taken on trust)."""
        if event.seq == 1:
            return GENESIS
        known = self._citations.known.recall(event.session, event.seq - 1)
        if known is not None:  # verified here already, by this consumer or another
            return ChainTip(event.seq - 1, known)
        try:
            stored = await event_by_seq(
                self._client, self._layout, event.session, event.seq - 1, self._own_problem
            )
        except (EventloomError, msgspec.DecodeError, msgspec.ValidationError, KeyError) as exc:
            log.warning(
                "session %s: the predecessor of seq %s is unreadable: %s", event.session, event.seq, exc
            )
            return None
        if stored is None:
            return f"{UNVERIFIED}: session {event.session} has no valid seq {event.seq - 1} before it"
        self._citations.saw(stored.event)
        return ChainTip(stored.event.seq, stored.event.hash)

    def _own_problem(self, event: Event) -> str | None:
        return self_problem(event, self._keyring)  # forged neighbours are stepped over
