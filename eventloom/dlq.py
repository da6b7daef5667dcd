"""The dead-letter stream: events a consumer could not take, with the reason, kept for inspection."""

from __future__ import annotations

import msgspec
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.consumer import read_stream
from eventloom.bus.stream import DLQ_STREAM, DLQ_SUBJECT_ROOT
from eventloom.event import utc_timestamp


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    consumer: str
    stream_seq: int
    subject: str
    error: str
    attempts: int = 1
    session: str | None = None
    seq: int | None = None
    at: str = msgspec.field(default_factory=utc_timestamp)
    data: str = ""


def dlq_subject(consumer: str) -> str:
    return f"{DLQ_SUBJECT_ROOT}.{consumer}"


async def dead_letter(client: Client, letter: DeadLetter) -> None:
    """Record a dead letter once per (consumer, stream seq), however often it is reported."""
    js = client.jetstream()
    await js.publish(
        dlq_subject(letter.consumer),
        msgspec.json.encode(letter),
        headers={"Nats-Msg-Id": f"{letter.consumer}:{letter.stream_seq}"},
    )


async def list_dead_letters(client: Client, consumer: str | None = None) -> list[DeadLetter]:
    subject = dlq_subject(consumer) if consumer else f"{DLQ_SUBJECT_ROOT}.>"
    letters: list[DeadLetter] = []
    seen: set[tuple[str, int]] = set()
    async for message in read_stream(client, DLQ_STREAM, [subject]):
        letter = msgspec.json.decode(message.data, type=DeadLetter)
        if (letter.consumer, letter.stream_seq) not in seen:
            seen.add((letter.consumer, letter.stream_seq))
            letters.append(letter)
    return letters


RETRY_BUCKET = "EVENTLOOM_DLQ_RETRY"


async def request_retry(client: Client, consumer: str, stream_seqs: list[int] | None = None) -> int:
    """Queue dead letters of `consumer` for another try by its worker (now, or when it next starts)."""
    letters = [
        d for d in await list_dead_letters(client, consumer) if not stream_seqs or d.stream_seq in stream_seqs
    ]
    bucket = await ensure_bucket(client, RETRY_BUCKET)  # a replicated node created it at its count
    for letter in letters:
        await bucket.put(f"{consumer}.{letter.stream_seq}", b"requested")
    return len(letters)


async def take_retry_requests(client: Client, consumer: str) -> list[int]:
    """Stream seqs whose retry was requested for `consumer` (the requests are removed)."""
    bucket = await ensure_bucket(client, RETRY_BUCKET)
    try:
        keys = await bucket.keys()  # nats-py's `filters` are substring matches; filter exactly here
    except nats.js.errors.NoKeysError:
        return []
    seqs = []
    for key in keys:
        if key.rsplit(".", 1)[0] != consumer:
            continue
        await bucket.purge(key)
        seqs.append(int(key.rsplit(".", 1)[1]))
    return sorted(seqs)


async def forget_dead_letter(client: Client, consumer: str, stream_seq: int) -> None:
    """Remove a dead letter once a retry succeeded."""
    async for message in read_stream(client, DLQ_STREAM, [dlq_subject(consumer)]):
        letter = msgspec.json.decode(message.data, type=DeadLetter)
        if letter.stream_seq == stream_seq:
            await client.jetstream().delete_msg(DLQ_STREAM, message.metadata.sequence.stream)
