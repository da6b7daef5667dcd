"""Reading the newest event of a session and any event by stream sequence."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from nats.aio.client import Client

from eventloom.bus.stream import StreamLayout, jetstream_api
from eventloom.errors import EventloomError
from eventloom.event import Event, decode_event

_NO_MESSAGE = 10037


@dataclass(frozen=True)
class StoredEvent:
    """An event together with where the stream keeps it."""

    event: Event
    stream_seq: int


async def last_event(client: Client, layout: StreamLayout, session: str) -> StoredEvent | None:
    return await _get(client, layout.name, {"last_by_subj": layout.subject_for(session)})


async def event_at(client: Client, layout: StreamLayout, stream_seq: int) -> StoredEvent:
    found = await _get(client, layout.name, {"seq": stream_seq})
    if found is None:
        raise EventloomError(f"stream {layout.name} has no message at sequence {stream_seq}")
    return found


async def _get(client: Client, stream: str, request: dict[str, object]) -> StoredEvent | None:
    response = await jetstream_api(client, f"STREAM.MSG.GET.{stream}", request)
    error = response.get("error")
    if error is not None:
        if error.get("err_code") == _NO_MESSAGE:
            return None
        raise EventloomError(f"stream {stream}: {error.get('description')}")
    message = response["message"]
    return StoredEvent(decode_event(base64.b64decode(message["data"])), int(message["seq"]))


async def event_by_seq(client: Client, layout: StreamLayout, session: str, seq: int) -> StoredEvent | None:
    """The session's event at event seq `seq`, found by binary search over stream sequences.

    A session's events are stored in seq order on one subject, so `next_by_subj` probes (the first message
    on the subject at or after a stream sequence) find any event in O(log stream length) requests.
    """
    last = await last_event(client, layout, session)
    if last is None or seq < 1 or seq > last.event.seq:
        return None
    if seq == last.event.seq:
        return last
    subject = layout.subject_for(session)
    low, high = 1, last.stream_seq
    while low <= high:
        middle = (low + high) // 2
        probe = await _get(client, layout.name, {"seq": middle, "next_by_subj": subject})
        if probe is None:
            high = middle - 1
        elif probe.event.seq == seq:
            return probe
        elif probe.event.seq < seq:
            low = probe.stream_seq + 1
        else:
            high = middle - 1
    return None
