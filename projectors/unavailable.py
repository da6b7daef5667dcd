"""Waiting out a read model that is down: the runner's calls on its store retry with growing pauses, say
why (and when they try again) to whoever listens, and give up as soon as the worker is asked to stop.

Giving up is safe because nothing is acknowledged while the store is down: the batch in hand is delivered
again when a worker next runs. Before, a node asked to stop while Neo4j was down sat out its supervisor's
15 s grace, retrying a store that could not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from eventloom.errors import ReadModelUnavailableError
from projectors.runner_options import RunnerStats, TroubleListener

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoppedWhileUnavailable(BaseException):
    """The worker was asked to stop while its read model was down: what it held stays unacknowledged.

    A `BaseException`, like cancellation: the handlers that count a failed apply (and dead-letter it) must
    let it through."""


class UnavailableWaits:
    """Runs calls on a read model, pausing along `waits` (the last one repeats) while it is unavailable."""

    def __init__(
        self, consumer: str, waits: Sequence[float], stats: RunnerStats, on_trouble: TroubleListener | None
    ) -> None:
        self._consumer = consumer
        self._waits = waits
        self._stats = stats
        self._on_trouble = on_trouble
        self.trouble: str | None = None  # why the read model cannot be written now (None: it can)
        self.stop: asyncio.Event | None = None  # set by the runner: once set, a pause ends the wait

    async def call(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, retried while the read model is unavailable; `StoppedWhileUnavailable` on stop."""
        attempt = 0
        while True:
            try:
                result = await call()
            except ReadModelUnavailableError as exc:
                wait = self._waits[min(attempt, len(self._waits) - 1)]
                log.warning("%s: read model unavailable (%s); pausing %.1fs", self._consumer, exc, wait)
                await self.report(f"read model unavailable: {exc}", wait)
                attempt += 1
                if await self._stopped_within(wait):
                    raise StoppedWhileUnavailable(f"{self._consumer}: stopped while {exc}") from exc
            else:
                if self.trouble is not None:
                    await self.report(None, None)
                return result

    async def report(self, trouble: str | None, retry_in_s: float | None) -> None:
        self.trouble = trouble
        if self._on_trouble is not None:
            await self._on_trouble(trouble, retry_in_s)

    async def _stopped_within(self, seconds: float) -> bool:
        """Pause `seconds` (counted as paused), or less if the worker is asked to stop meanwhile."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            if self.stop is None:
                await asyncio.sleep(seconds)
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=seconds)
            return self.stop.is_set()
        finally:
            self._stats.paused_s += loop.time() - started
