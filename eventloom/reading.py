"""Reading events off the stream for a caller: tail, replay, timeline, handoff, the events API.

A message on a session's subject is one of its events to a reader when it decodes, is in canonical form,
names that session, and its hash and its signature hold against the keyring: the checks whose failure
`eventloom verify` quarantines a message for (`eventloom.tail.event_problem` decides, for all of them). A
reader skips any other message and counts it, so bytes published past the appender break no read, and an
event signed by a key nobody trusted reaches no caller (no consumer believes it either: docs/security.md);
the count points at `eventloom quarantine list`. A cleared message is skipped all the same: clearing records
that an operator looked at it, it does not make it an event. How events link (seq + 1, prev_hash) is
`verify`'s to check: a reader looks at each message on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Final

from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.bus.consumer import read_stream_batches
from eventloom.bus.stream import StreamLayout
from eventloom.chain import self_problem
from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.tail import StoredEvent, event_by_seq, event_problem

SEE_QUARANTINE: Final = "see eventloom quarantine list"
CHECKED_TOGETHER: Final = 64
"""Messages are checked this many at a time, in a worker thread when there are more than a few: an
unverified signature costs ~100 us, so a 5,000-event page would otherwise hold the event loop (a
gateway's, say) for half a second, and a caller that stops after a few events pays for one chunk, not
for the whole fetch."""
CHECKED_INLINE: Final = 8
"""So few messages (a follow's trickle, a session's last ones) are checked on the loop: a thread costs more
than they do."""


def skipped_warnings(count: int) -> list[str]:
    """What a reader's answer says about the `count` messages it skipped (nothing when none)."""
    if not count:
        return []
    return [f"skipped {count} message(s) that are not events: {SEE_QUARANTINE}"]


class EventReading:
    """One read's events in stream order, from event seq `from_seq` of each session read.

    `skipped` counts the messages passed over that are not events, from where the read starts (past the
    session's event `from_seq - 1`): a page of a timeline does not count again what an earlier page did."""

    def __init__(
        self,
        client: Client,
        layout: StreamLayout,
        keys: KeyStore,
        subjects: Sequence[str],
        *,
        from_seq: int = 1,
        start_stream_seq: int = 1,
        follow: bool = False,
    ) -> None:
        """`start_stream_seq`: where in the stream to start, when the caller knows (it skips a search)."""
        self.skipped = 0
        self._batches = read_stream_batches(
            client, layout.name, subjects, start_stream_seq=start_stream_seq, follow=follow
        )
        self._events = self._read(keys, from_seq)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events

    async def aclose(self) -> None:
        await self._events.aclose()

    @property
    def warnings(self) -> list[str]:
        return skipped_warnings(self.skipped)

    async def _read(self, keys: KeyStore, from_seq: int) -> AsyncGenerator[Event, None]:
        keyring = await asyncio.to_thread(keys.load_keyring)  # each read's own: a key trusted since counts

        def problem(event: Event) -> str | None:
            # An event before the read's start goes to no caller: its signature is not worth checking.
            return None if event.seq < from_seq else self_problem(event, keyring)

        def verdicts(messages: list[Msg]) -> list[tuple[str, Event | str]]:
            return [
                (session, event_problem(message.data, session, problem))
                for message in messages
                for session in (message.subject.rsplit(".", 1)[-1],)
            ]

        async def checked(messages: list[Msg]) -> list[tuple[str, Event | str]]:
            return (
                await asyncio.to_thread(verdicts, messages)
                if len(messages) > CHECKED_INLINE
                else verdicts(messages)
            )

        read_up_to: dict[str, int] = {}
        async with contextlib.aclosing(self._batches):  # a caller that stops early ends the consumer
            async for fetched in self._batches:
                for start in range(0, len(fetched), CHECKED_TOGETHER):
                    for session, verdict in await checked(fetched[start : start + CHECKED_TOGETHER]):
                        if isinstance(verdict, str):
                            if read_up_to.get(session, 0) >= from_seq - 1:
                                self.skipped += 1
                            continue
                        read_up_to[session] = max(read_up_to.get(session, 0), verdict.seq)
                        if verdict.seq >= from_seq:
                            yield verdict


async def verified_event(
    client: Client, layout: StreamLayout, keys: KeyStore, session: str, seq: int
) -> StoredEvent | None:
    """The session's event `seq`; None when no event that holds is there (a message that is not an event
    has no seq, even one that claims it)."""
    keyring = await asyncio.to_thread(keys.load_keyring)
    return await event_by_seq(client, layout, session, seq, lambda event: self_problem(event, keyring))
