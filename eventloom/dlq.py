"""The dead-letter stream: events a consumer could not take, with the reason, kept for inspection.

A worker whose retry of a dead letter applied records that on `eventloom_dlq.<consumer>.resolved`
instead of deleting the letter: deleting from the stream is the bus admin's alone (eventloom/bus/auth.py),
so a worker's credentials cannot erase the record of what it failed to take."""

from __future__ import annotations

from typing import Final

import msgspec
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.consumer import read_stream
from eventloom.bus.stream import DLQ_STREAM, DLQ_SUBJECT_ROOT, subject_counts
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


RESOLVED: Final = "resolved"


def dlq_subject(consumer: str) -> str:
    return f"{DLQ_SUBJECT_ROOT}.{consumer}"


def _resolved_subject(consumer: str) -> str:
    return f"{dlq_subject(consumer)}.{RESOLVED}"


async def dead_letter(client: Client, letter: DeadLetter) -> None:
    """Record a dead letter once per (consumer, stream seq), however often it is reported."""
    js = client.jetstream()
    await js.publish(
        dlq_subject(letter.consumer),
        msgspec.json.encode(letter),
        headers={"Nats-Msg-Id": f"{letter.consumer}:{letter.stream_seq}"},
    )


async def list_dead_letters(client: Client, consumer: str | None = None) -> list[DeadLetter]:
    """The dead letters still open: each (consumer, stream seq) once, none a retry resolved since."""
    subjects = [dlq_subject(consumer), _resolved_subject(consumer)] if consumer else [f"{DLQ_SUBJECT_ROOT}.>"]
    letters: dict[tuple[str, int], DeadLetter] = {}
    async for message in read_stream(client, DLQ_STREAM, subjects):
        letter = msgspec.json.decode(message.data, type=DeadLetter)
        key = (letter.consumer, letter.stream_seq)
        if message.subject.endswith(f".{RESOLVED}"):
            letters.pop(key, None)
        elif key not in letters:
            letters[key] = letter
    return list(letters.values())


async def dead_letter_counts(client: Client) -> dict[str, int]:
    """Open dead letters per consumer, counted from the stream's subjects (not read one by one)."""
    counts = await subject_counts(client, DLQ_STREAM, f"{DLQ_SUBJECT_ROOT}.>")
    prefix = f"{DLQ_SUBJECT_ROOT}."
    open_letters: dict[str, int] = {}
    for subject, count in counts.items():
        if not subject.endswith(f".{RESOLVED}"):
            consumer = subject.removeprefix(prefix)
            resolved = counts.get(_resolved_subject(consumer), 0)
            open_letters[consumer] = max(0, count - resolved)
    return open_letters


RETRY_BUCKET = "EVENTLOOM_DLQ_RETRY"


async def request_retry(client: Client, consumer: str, stream_seqs: list[int] | None = None) -> int:
    """Queue dead letters of `consumer` for another try by its worker (now, or when it next starts)."""
    letters = [
        d for d in await list_dead_letters(client, consumer) if not stream_seqs or d.stream_seq in stream_seqs
    ]
    bucket = await ensure_bucket(client, RETRY_BUCKET)  # the node created it (at its replica count)
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


async def resolve_dead_letter(client: Client, consumer: str, stream_seq: int) -> None:
    """Record that `consumer`'s retry of its dead letter of `stream_seq` applied: it is listed no more."""
    marker = DeadLetter(consumer=consumer, stream_seq=stream_seq, subject="", error=RESOLVED)
    # Once per letter within the duplicate window, however often the worker reports it (a lost ack).
    headers = {"Nats-Msg-Id": f"{RESOLVED}:{consumer}:{stream_seq}"}
    data = msgspec.json.encode(marker)
    await client.jetstream().publish(_resolved_subject(consumer), data, headers=headers)


async def forget_dead_letter(client: Client, consumer: str, stream_seq: int) -> None:
    """Delete a dead letter (the admin's, on clearing a quarantine)."""
    async for message in read_stream(client, DLQ_STREAM, [dlq_subject(consumer)]):
        letter = msgspec.json.decode(message.data, type=DeadLetter)
        if letter.stream_seq == stream_seq:
            await client.jetstream().delete_msg(DLQ_STREAM, message.metadata.sequence.stream)
