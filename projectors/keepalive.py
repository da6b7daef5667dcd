"""`InProgress`: keep the messages a worker holds from being handed to another worker while it is alive.

Several workers of one projector share one durable consumer; what a worker fetched and has not acknowledged
goes to another worker once the consumer's ack wait passes without word from it. That is how a `kill -9`ed
worker's batch is taken over, so the ack wait is short (`EVENTLOOM_PROJECTOR_ACK_WAIT_S`, a few seconds).
A batch may take longer than that to write, so a worker that is alive says so: every message held longer
than a third of the ack wait gets an in-progress ack (`+WPI`), which restarts its timer on the server. A
fast batch costs nothing here; only a slow one is kept alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable

import nats.errors
from nats.aio.msg import Msg

log = logging.getLogger(__name__)


class InProgress:
    """The messages this worker holds, each with when its ack-wait timer last restarted."""

    def __init__(self, ack_wait_s: float, alive: Callable[[], bool] = lambda: True) -> None:
        if not ack_wait_s > 0:
            raise ValueError(f"ack_wait_s: must be more than 0 seconds, got {ack_wait_s!r}")
        self.ack_wait_s = ack_wait_s
        self._alive = alive  # False once fenced: what it holds must go to the new holder, not be kept
        self._held: dict[int, tuple[Msg, float]] = {}
        self.sent = 0
        """In-progress acks sent (a slow batch was kept alive this many message-times)."""

    def hold(self, messages: Iterable[Msg]) -> None:
        now = time.monotonic()
        for message in messages:
            self._held[id(message)] = (message, now)

    def release(self, messages: Iterable[Msg]) -> None:
        for message in messages:
            self._held.pop(id(message), None)

    @property
    def held(self) -> int:
        return len(self._held)

    async def touch_due(self) -> int:
        """An in-progress ack for every held, unanswered message whose timer is a third of the way on."""
        if not self._alive():
            return 0
        now = time.monotonic()
        due = self.ack_wait_s / 3
        touched = 0
        for key, (message, since) in list(self._held.items()):
            if message.is_acked:
                self._held.pop(key, None)
            elif now - since >= due:
                with contextlib.suppress(nats.errors.Error):  # a lost connection loses the batch anyway
                    await message.in_progress()
                    self._held[key] = (message, now)
                    touched += 1
        self.sent += touched
        return touched

    async def run(self) -> None:
        """Until cancelled: look every sixth of the ack wait, so no timer runs past half of it."""
        while True:
            await asyncio.sleep(self.ack_wait_s / 6)
            touched = await self.touch_due()
            if touched:
                log.debug("kept %s held message(s) in progress", touched)
