"""An append the stream refused because it is full: at its own size limit (`EVENTLOOM_STREAM_MAX_BYTES`,
`discard: new`) or out of the server's JetStream storage. Either way nothing was stored, and a retry fails
the same way until an operator makes room, so the caller is told which limit and what to do."""

from __future__ import annotations

import contextlib
from typing import Final

import nats.errors
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.stream import jetstream_api
from eventloom.errors import EventloomError, StreamFullError

STORE_FAILED: Final = 10077  # JSStreamStoreFailedF; "maximum bytes exceeded" when at max_bytes
SERVER_STORAGE_FULL: Final = frozenset({10023, 10047})  # insufficient resources / storage resources


async def append_refused(client: Client, stream: str, exc: nats.js.errors.APIError) -> EventloomError:
    """What to raise for an append the stream answered with an error other than a lost race."""
    description = exc.description or ""
    if exc.err_code == STORE_FAILED and "maximum bytes" in description:
        return StreamFullError(
            f"stream {stream} is full: it is at its size limit{await _limit(client, stream)} "
            "(EVENTLOOM_STREAM_MAX_BYTES) and refuses new events rather than drop old ones; nothing was "
            "appended. Raise EVENTLOOM_STREAM_MAX_BYTES (0: no limit) and restart the node, which applies "
            "it to the stream"
        )
    if exc.err_code in SERVER_STORAGE_FULL:
        return StreamFullError(
            f"stream {stream}: the NATS server has no JetStream storage left ({description}); nothing was "
            "appended. Free disk space under the server's store_dir or raise its jetstream max_file_store"
        )
    return EventloomError(f"stream rejected the append: {description}")


async def _limit(client: Client, stream: str) -> str:
    """` of N bytes`, the stream's max_bytes now (empty if it cannot be read: the refusal stands)."""
    with contextlib.suppress(nats.errors.Error, TimeoutError):
        info = await jetstream_api(client, f"STREAM.INFO.{stream}")
        limit = int(info.get("config", {}).get("max_bytes", -1))
        if limit > 0:
            return f" of {limit:,} bytes"
    return ""
