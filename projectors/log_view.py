"""The log as a `ProcessProducer` reads it: earlier events by seq, a session's stretch, a state of its own."""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from typing import Final

import nats.js.errors
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.event import Event, decode_event, encode_event
from eventloom.log import EventLog
from projectors.protocol import ProducerState

STATE_BUCKET: Final = "EVENTLOOM_PRODUCER_STATE"
_KEY: Final = re.compile(r"^[A-Za-z0-9_=-]{1,200}$")


class KvProducerState:
    """`ProducerState` in one KV bucket shared by all producers, each under its own key prefix."""

    def __init__(self, bucket: KeyValue, producer: str) -> None:
        self._bucket = bucket
        self._prefix = f"{producer}."

    def _key(self, key: str) -> str:
        if not _KEY.fullmatch(key):
            raise ValueError(f"producer state key {key!r}: use 1-200 of [A-Za-z0-9_=-]")
        return self._prefix + key

    async def get(self, key: str) -> bytes | None:
        try:
            entry = await self._bucket.get(self._key(key))
        except nats.js.errors.KeyNotFoundError:
            return None
        return entry.value

    async def create(self, key: str, value: bytes) -> bool:
        try:
            await self._bucket.create(self._key(key), value)
        except nats.js.errors.KeyWrongLastSequenceError:
            return False
        return True

    async def put(self, key: str, value: bytes) -> None:
        await self._bucket.put(self._key(key), value)


class RecentEvents:
    """The last `limit` verified events given to a process's producers, by (session, seq).

    One is shared by the views of every producer a runtime feeds (they are all given the same events, in
    stream order): each event is held once, not once per producer. It is held encoded (~1 KB, one block
    outside Python's small-object arenas) rather than decoded (~3 KB in ~60 small objects): a hit costs a
    decode (~2 us), where a miss costs a read from the stream.
    """

    def __init__(self, limit: int = 4096) -> None:
        self._events: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._events)

    def saw(self, event: Event) -> None:
        """Remember `event`, verified and given to the producers."""
        key = (event.session, event.seq)
        self._events[key] = encode_event(event)
        self._events.move_to_end(key)
        while len(self._events) > self._limit:
            self._events.popitem(last=False)

    def get(self, session: str, seq: int) -> Event | None:
        encoded = self._events.get((session, seq))
        return None if encoded is None else decode_event(encoded)


class StreamLogView:
    """A `LogView` over the event stream for one producer.

    The runtime remembers every event the producers are given in `recent`, in stream order, so "the event
    before this one" (the commonest question) is answered from memory, not with a search of the stream.
    """

    def __init__(self, log: EventLog, state: ProducerState, recent: RecentEvents) -> None:
        self._log = log
        self._state = state
        self._recent = recent

    @property
    def state(self) -> ProducerState:
        return self._state

    async def event(self, session: str, seq: int) -> Event | None:
        recent = self._recent.get(session, seq)
        if recent is not None:
            return recent
        stored = await self._log.event(session, seq)
        return None if stored is None else stored.event

    async def session_events(self, session: str, after_seq: int, upto_seq: int) -> list[Event]:
        if upto_seq <= after_seq:
            return []
        first = await self._log.event(session, after_seq + 1)
        if first is None:
            return []
        events: list[Event] = []
        reading = self._log.events(session, from_seq=after_seq + 1, start_stream_seq=first.stream_seq)
        async with contextlib.aclosing(reading):
            async for event in reading:
                if event.seq > upto_seq:
                    break
                if not events or event.seq == events[-1].seq + 1:
                    events.append(event)
        return events


async def state_bucket(log: EventLog) -> KeyValue:
    return await ensure_bucket(log.client, STATE_BUCKET, replicas=log.settings.replicas)
