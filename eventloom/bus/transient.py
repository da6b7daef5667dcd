"""The NATS failures a client waits out and retries (a cluster electing a leader, a reconnect), rather
than failing the append or the read."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

import nats.errors
import nats.js.errors

from eventloom.errors import BusUnavailableError

_T = TypeVar("_T")

JETSTREAM_UNAVAILABLE: Final = 10008
"""503 "JetStream system temporarily unavailable": a cluster electing a leader. Other 503s (a stream at
its size limit) are refusals."""


class Electing(Exception):
    """JetStream answered that it is electing a leader: waited out like a timeout."""


@contextlib.contextmanager
def electing() -> Iterator[None]:
    try:
        yield
    except nats.js.errors.ServiceUnavailableError as exc:
        if exc.err_code == JETSTREAM_UNAVAILABLE:
            raise Electing(str(exc)) from exc
        raise


TRANSIENT = (
    nats.errors.TimeoutError,
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.NoRespondersError,
    nats.js.errors.NoStreamResponseError,
    Electing,
    TimeoutError,
)
"""Failures an append or a read waits out and retries."""

DEFAULT_ATTEMPTS: Final = 20


async def unavailable_wait(attempt: int) -> None:
    """The wait before asking NATS again. While a stream elects a new leader (4-9 s in nats-server, and a
    second round can follow) a request can be refused at once ("no responders"), so the retries must span
    the election, not just count: quick at first, then 1.5 s apart, about 20 s over `DEFAULT_ATTEMPTS`."""
    await asyncio.sleep(min(1.5, 0.1 * 2 ** min(attempt, 4)) * (0.75 + random.random() / 4))


async def retried_while_electing(
    operation: Callable[[], Awaitable[_T]], what: str, attempts: int = DEFAULT_ATTEMPTS
) -> _T:
    """`operation` run again while NATS answers with a transient failure; `BusUnavailableError` naming
    `what` once `attempts` have failed. Only for operations that are safe to repeat (reads, idempotent
    writes)."""
    failure: Exception | None = None
    for attempt in range(attempts):
        try:
            with electing():
                return await operation()
        except TRANSIENT as exc:
            failure = exc
            await unavailable_wait(attempt)
    raise BusUnavailableError(f"NATS did not answer for {what}: {failure!r}") from failure
