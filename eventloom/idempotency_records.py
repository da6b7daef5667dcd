"""An idempotency key's record in its KV bucket: the stream sequence of the event the key appended."""

from __future__ import annotations

import contextlib

import nats.js.errors
from nats.js.kv import KeyValue


async def recall(kv: KeyValue, key: str) -> KeyValue.Entry | None:
    """The record of an idempotency key: the stream sequence of the event it appended, if any."""
    try:
        return await kv.get(key)
    except nats.js.errors.KeyNotFoundError:
        return None


async def remember(kv: KeyValue, key: str, stream_seq: int, stale: int | None = None) -> None:
    """Record that `key` appended the event at `stream_seq` (replacing the `stale` revision's record)."""
    with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):  # the first writer recorded it
        if stale is None:
            await kv.create(key, str(stream_seq).encode())
        else:
            await kv.update(key, str(stream_seq).encode(), last=stale)
