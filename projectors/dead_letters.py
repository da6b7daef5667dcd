"""How a projector's runner gives up on an event: at once when it fails verification (refused), or after
its last attempt when applying it keeps failing (retried with backoff before that). Either way the event
goes to the dead-letter stream with the consumer, the attempts and the reason, and the consumer goes on."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.citations import UNCITED
from eventloom.dlq import DeadLetter, dead_letter, list_dead_letters
from eventloom.event import Event
from projectors.batches import FetchedEvent

log = logging.getLogger(__name__)


class FailureCounts(Protocol):
    """Where the counts go (a runner's stats)."""

    dead_lettered: int
    refused: int
    last_refusal: str | None


class DeadLetterBox:
    """One consumer's dead letters: which (session, seq) it gave up on, and giving up on more."""

    def __init__(
        self,
        client: Client,
        consumer: str,
        counts: FailureCounts,
        *,
        max_deliver: int,
        backoff_s: Sequence[float],
    ) -> None:
        self._client = client
        self.consumer = consumer
        self._counts = counts
        self._max_deliver = max_deliver
        self._backoff_s = backoff_s
        self.dead: set[tuple[str, int]] = set()
        """What this consumer dead-lettered: a session's later events need not wait behind these."""

    async def load(self) -> None:
        """What earlier workers of this consumer dead-lettered."""
        letters = await list_dead_letters(self._client, self.consumer)
        self.dead = {(d.session, d.seq) for d in letters if d.session is not None and d.seq is not None}

    async def refuse(self, item: FetchedEvent, reason: str) -> None:
        """Dead-letter an event that failed verification, unapplied (nothing it claims is taken as true)."""
        self._counts.refused += 1
        self._counts.last_refusal = f"{item.event.session}#{item.event.seq}: {reason}"
        stream_seq = item.message.metadata.sequence.stream
        log.warning("%s: refused stream seq %s: %s", self.consumer, stream_seq, reason)
        # An event refused for what it cites is genuine (signed, chained): its seq is known, so the
        # session's later events go on past it. An unverified one's seq is not to be believed.
        genuine = item.event if reason.startswith(UNCITED) else None
        await self.letter(item.message, genuine, reason, session=item.event.session)

    async def failed(self, item: FetchedEvent, error: Exception) -> bool:
        """Dead-letter after the last attempt (True), else ask for a later redelivery (False)."""
        attempts = item.message.metadata.num_delivered or 1
        event = item.event
        if attempts >= self._max_deliver:
            await self.letter(item.message, event, f"{type(error).__name__}: {error}", attempts)
            return True
        delay = self._backoff_s[min(attempts - 1, len(self._backoff_s) - 1)]
        log.warning(
            "%s: %s#%s failed (attempt %s), retrying in %ss: %s",
            self.consumer,
            event.session,
            event.seq,
            attempts,
            delay,
            error,
        )
        await item.message.nak(delay=delay)
        return False

    async def letter(
        self, message: Msg, event: Event | None, error: str, attempts: int = 1, *, session: str | None = None
    ) -> None:
        """Dead-letter `message`; an unverified one has no `event` (nothing it claims is taken as true)."""
        self._counts.dead_lettered += 1
        if event is not None:
            self.dead.add((event.session, event.seq))
        await dead_letter(
            self._client,
            DeadLetter(
                consumer=self.consumer,
                stream_seq=message.metadata.sequence.stream,
                subject=message.subject,
                error=error,
                attempts=attempts,
                session=event.session if event else session,
                seq=event.seq if event else None,
                data=message.data.decode("utf-8", "replace"),
            ),
        )
        await message.ack()
