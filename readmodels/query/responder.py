"""Answering requests over NATS: several at once, none after its asker gave up, and a prompt "busy" answer
instead of a queue that grows without bound.

nats-py runs a subscription's callback for one message at a time, so a service answering in its callback
answers one question at a time: while the node was projecting a burst, a checkout took a few seconds and
the questions behind it waited until their askers had given up, then were answered anyway, for nobody.
Here the callback only notes when a request arrived; `concurrency` workers answer, skipping requests older
than their asker's timeout (the `Eventloom-Timeout-S` header, measured on this process's own clock from
arrival, so no clocks are compared), and a request that finds `max_waiting` others waiting is told at
once that the service is busy.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

TIMEOUT_HEADER: Final = "Eventloom-Timeout-S"
DEFAULT_ASKER_TIMEOUT_S: Final = 30.0
_LONGEST_ASKER_TIMEOUT_S: Final = 600.0

Respond = Callable[[Msg], Awaitable[None]]
"""Answers one request (and replies to it)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingLimits:
    concurrency: int = 4
    max_waiting: int = 256


def timeout_headers(timeout_s: float) -> dict[str, str]:
    """The headers an asker sends so that the service does not answer after it has given up."""
    return {TIMEOUT_HEADER: f"{timeout_s:g}"}


def asker_timeout_s(message: Msg) -> float:
    """How long the asker waits, from its header; a missing or malformed one means the default."""
    text = (message.headers or {}).get(TIMEOUT_HEADER, "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_ASKER_TIMEOUT_S
    if not math.isfinite(value) or value <= 0:
        return DEFAULT_ASKER_TIMEOUT_S
    return min(value, _LONGEST_ASKER_TIMEOUT_S)


@dataclass
class ServingCounts:
    answered: int = 0
    expired: int = 0
    refused_busy: int = 0


class Responder:
    """Serves one subscription (`subject`, queue group `queue`) with `respond` until `stop` is set;
    `busy` replies to a request that arrives while `max_waiting` others wait. Requests on the subjects in
    `immediate` (cheap ones, such as a health probe) are answered on arrival, ahead of the queue."""

    def __init__(
        self,
        client: Client,
        subject: str,
        queue: str,
        respond: Respond,
        busy: Respond,
        limits: ServingLimits | None = None,
        immediate: frozenset[str] = frozenset(),
    ) -> None:
        self._client = client
        self._subject = subject
        self._queue_group = queue
        self._respond = respond
        self._busy = busy
        self.limits = limits or ServingLimits()
        self._immediate = immediate
        self._waiting: asyncio.Queue[tuple[float, Msg]] = asyncio.Queue(self.limits.max_waiting)
        self.counts = ServingCounts()

    async def _received(self, message: Msg) -> None:
        if message.subject in self._immediate:
            await self._answer(message)
            return
        try:
            self._waiting.put_nowait((time.monotonic(), message))
        except asyncio.QueueFull:
            self.counts.refused_busy += 1
            await self._busy(message)

    async def _work(self) -> None:
        while True:
            arrived, message = await self._waiting.get()
            if time.monotonic() - arrived > asker_timeout_s(message):
                self.counts.expired += 1
                expired = self.counts.expired
                if expired in (1, 10, 100) or expired % 1000 == 0:
                    log.warning("%s: %d requests expired before an answer", self._subject, expired)
                continue
            await self._answer(message)

    async def _answer(self, message: Msg) -> None:
        try:
            await self._respond(message)
        except nats.errors.Error as exc:  # the connection is going away; the asker will time out
            log.debug("%s: could not reply: %s", message.subject, exc)
        except Exception:  # a worker must outlive one request
            log.exception("%s: answering failed", message.subject)
        self.counts.answered += 1

    async def serve(self, stop: asyncio.Event, subscribed: asyncio.Event | None = None) -> None:
        subscription = await self._client.subscribe(self._subject, queue=self._queue_group, cb=self._received)
        workers = [asyncio.create_task(self._work()) for _ in range(self.limits.concurrency)]
        try:
            await self._client.flush()
            if subscribed is not None:
                subscribed.set()
            await stop.wait()
        finally:
            with contextlib.suppress(nats.errors.Error):
                await subscription.unsubscribe()
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
