"""Quarantine: stream messages on a session's subject that are not its events, and clearing them.

The appender, every consumer and every reader step over such a message (see `eventloom.tail.valid_tail`,
`eventloom.trust.EventVerifier` and `eventloom.reading`), so it harms nothing, but the stream denies deletes
(it is the source of truth), so the message stays and `verify` names it until an operator has looked at it.
Clearing records that review in a bucket, keyed by the SHA-256 of the message's bytes: `verify` then counts
it as cleared instead of failing, and the appender may step over it even when it is the newest message
signed by an unknown key (it refuses to chain past such a message otherwise: it may be a peer's event whose
key was never trusted). Readers skip it all the same: a review does not make it an event.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

import msgspec
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.stream import StreamLayout
from eventloom.dlq import forget_dead_letter, list_dead_letters
from eventloom.event import utc_timestamp

QUARANTINE_BUCKET: Final = "EVENTLOOM_QUARANTINE"


@dataclass(frozen=True)
class Quarantined:
    """A stream message on a session's subject that is not one of its events: stepped over, never chained."""

    stream_seq: int
    session: str
    seq: int  # the seq it claims, or where the session stood when it came
    reason: str
    digest: str  # SHA-256 of its bytes: what a clearing names


class ClearedRecord(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    stream_seq: int
    reason: str
    cleared_by: str
    cleared_at: str


def message_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def cleared_digests(client: Client) -> set[str]:
    """The digests of every message an operator cleared (empty when nothing ever was)."""
    try:
        bucket = await client.jetstream().key_value(QUARANTINE_BUCKET)
        return set(await bucket.keys())
    except (nats.js.errors.BucketNotFoundError, nats.js.errors.NoKeysError):
        return set()


async def clear_quarantined(
    client: Client, layout: StreamLayout, messages: list[Quarantined], cleared_by: str
) -> int:
    """Record `messages` as reviewed and drop every consumer's dead letter of them; returns how many."""
    bucket = await _bucket(client)
    for message in messages:
        record = ClearedRecord(
            session=message.session,
            stream_seq=message.stream_seq,
            reason=message.reason,
            cleared_by=cleared_by,
            cleared_at=utc_timestamp(),
        )
        await bucket.put(message.digest, msgspec.json.encode(record))
    cleared = {(m.stream_seq, layout.subject_for(m.session)) for m in messages}
    for letter in await list_dead_letters(client):
        if (letter.stream_seq, letter.subject) in cleared:
            await forget_dead_letter(client, letter.consumer, letter.stream_seq)
    return len(messages)


async def _bucket(client: Client) -> KeyValue:
    return await ensure_bucket(client, QUARANTINE_BUCKET)  # the node created it (at its replica count)
