"""A `LogView` over a list of events, for running `ProcessProducer`s without a bus."""

from __future__ import annotations

from collections.abc import Sequence

from eventloom.event import Event
from projectors.protocol import DerivedEvent, ProcessProducer, ProducerState


class MemoryState:
    """`ProducerState` in a dict."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}

    async def get(self, key: str) -> bytes | None:
        return self.values.get(key)

    async def create(self, key: str, value: bytes) -> bool:
        if key in self.values:
            return False
        self.values[key] = value
        return True

    async def put(self, key: str, value: bytes) -> None:
        self.values[key] = value


class ListLogView:
    """The events of `events` (any sessions), read the way `StreamLogView` reads the stream."""

    def __init__(self, events: Sequence[Event]) -> None:
        self._events = {(e.session, e.seq): e for e in events}
        self._state = MemoryState()

    @property
    def state(self) -> ProducerState:
        return self._state

    async def event(self, session: str, seq: int) -> Event | None:
        return self._events.get((session, seq))

    async def session_events(self, session: str, after_seq: int, upto_seq: int) -> list[Event]:
        return [
            self._events[(session, s)]
            for s in range(after_seq + 1, upto_seq + 1)
            if (session, s) in self._events
        ]


async def processed(producer: ProcessProducer, events: Sequence[Event]) -> list[DerivedEvent]:
    """What `producer` derives from the last of `events`, reading the ones before it."""
    return await producer.process(events[-1], ListLogView(events))
