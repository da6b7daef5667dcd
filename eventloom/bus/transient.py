"""The NATS failures an appender waits out and retries, rather than refusing the append."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import nats.errors
import nats.js.errors

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
"""Failures an append waits out and retries."""
