"""Running a producer: derive, check citations, and append each derived event once, ever.

A producer runs through the same runner as a projector (`ProducerProjection` is a Projector whose "read
model" is the log itself), so retries, dead letters, ordering and partitions work the same way.

Once-ever emission uses a create-only fence per derivation in the `EVENTLOOM_FENCES` KV bucket:
`pending:<T>` is written before the append (T = the target session's last stream seq) and `done:<S>`
after it. A crash in between leaves `pending:<T>`; the retry then scans only the target session's events
after T for the derived event, so it is never appended twice, however long the restart takes.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from typing import Final

import nats.js.errors
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.tail import last_event
from projectors.log_view import KvProducerState, RecentEvents, StreamLogView, state_bucket
from projectors.protocol import DerivedEvent, ProcessProducer, Producer

FENCE_BUCKET: Final = "EVENTLOOM_FENCES"


class ProducerProjection:
    """Adapts producers to the `Projector` protocol for the runner.

    Several producers can share one projection (and so one consumer: each event is delivered once for all
    of them); fences and actors stay per producer.
    """

    def __init__(
        self,
        producers: Producer | ProcessProducer | Sequence[Producer | ProcessProducer],
        log: EventLog,
        name: str | None = None,
    ) -> None:
        self._producers: list[Producer | ProcessProducer] = (
            [producers] if isinstance(producers, Producer | ProcessProducer) else list(producers)
        )
        if not self._producers:
            raise ValueError("producers: at least one is needed")
        self.name = name or "+".join(p.name for p in self._producers)
        self._log = log
        self._fences: KeyValue | None = None
        self._views: dict[str, StreamLogView] = {}
        self._recent = RecentEvents()
        self.emitted = 0
        self.skipped_citations = 0

    async def open(self) -> None:
        self._fences = await ensure_bucket(
            self._log.client, FENCE_BUCKET, replicas=self._log.settings.replicas
        )
        if any(isinstance(p, ProcessProducer) for p in self._producers):
            bucket = await state_bucket(self._log)
            self._views = {
                p.name: StreamLogView(self._log, KvProducerState(bucket, p.name), self._recent)
                for p in self._producers
            }

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return {}  # fences, not checkpoints, make emission exactly-once

    async def apply(self, events: Sequence[Event]) -> None:
        for event in events:
            for producer in self._producers:
                if isinstance(producer, ProcessProducer):
                    derivations = await producer.process(event, self._views[producer.name])
                else:
                    derivations = producer.derive(event)
                for index, derived in enumerate(derivations):
                    await self._emit_once(producer.name, event, derived, index)
            if self._views:
                self._recent.saw(event)

    async def close(self) -> None:
        self._fences = None

    async def _emit_once(self, producer: str, source: Event, derived: DerivedEvent, index: int) -> None:
        assert self._fences is not None
        if not await self._citations_hold(derived):
            self.skipped_citations += 1
            return
        session = derived.session or source.session
        token = f"{source.hash}:{derived.key or index}".encode()
        fence = f"{producer}.{hashlib.sha256(token).hexdigest()[:48]}"
        state = await _fence_state(self._fences, fence)
        if state.startswith("done:"):
            return
        if state.startswith("pending:"):
            if await self._already_appended(session, int(state.split(":", 1)[1]), source, derived):
                await self._fences.put(fence, b"done:found")
                return
        else:
            tail = await last_event(self._log.client, self._log.layout, session)
            try:
                await self._fences.create(fence, f"pending:{tail.stream_seq if tail else 0}".encode())
            except nats.js.errors.KeyWrongLastSequenceError:
                return await self._emit_once(producer, source, derived, index)  # another worker fenced it
        event = await self._log.append(
            session,
            derived.type,
            derived.actor or f"producer:{producer}",
            derived.payload,
            caused_by=[source.hash],
        )
        await self._fences.put(fence, f"done:{event.seq}".encode())
        self.emitted += 1

    async def _citations_hold(self, derived: DerivedEvent) -> bool:
        for cited in derived.requires:
            found = await self._log.event(cited.session, cited.seq)
            if found is None or found.event.hash != cited.hash:
                return False
        return True

    async def _already_appended(self, session: str, after: int, source: Event, derived: DerivedEvent) -> bool:
        reading = self._log.events(session, start_stream_seq=after + 1)
        async with contextlib.aclosing(reading):
            async for candidate in reading:
                if (
                    source.hash in candidate.caused_by
                    and candidate.type == derived.type
                    and candidate.payload == derived.payload
                ):
                    return True
        return False


async def _fence_state(fences: KeyValue, key: str) -> str:
    try:
        entry = await fences.get(key)
    except nats.js.errors.KeyNotFoundError:
        return ""
    return (entry.value or b"").decode()
