"""The dead-letter stream: events a consumer could not take, with the reason, kept for inspection."""

from __future__ import annotations

import msgspec
from nats.aio.client import Client

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
