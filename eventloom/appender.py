"""Appending events: chain, sign, publish with optimistic concurrency, pipelined per session."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar, cast

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.publish import publish_many
from eventloom.bus.stream import StreamLayout
from eventloom.bus.transient import TRANSIENT, electing, retried_while_electing, unavailable_wait
from eventloom.errors import (
    BusUnavailableError,
    ConcurrencyError,
    EventValidationError,
    IdempotencyConflictError,
    WrongExpectedSeqError,
)
from eventloom.event import Event, encode_event
from eventloom.idempotency_records import recall, remember
from eventloom.keys import KeyStore, Signer
from eventloom.position import Appended, Position
from eventloom.request import AppendRequest
from eventloom.sealing import Sealer
from eventloom.stream_full import append_refused
from eventloom.tail import MalformedMessageError, TailFinder, event_at, last_event

IDEMPOTENCY_BUCKET: Final = "EVENTLOOM_IDEMPOTENCY"
WRONG_LAST_SEQUENCE: Final = 10071
MAX_BATCH: Final = 1000  # the server's limit for one atomic batch
ATTEMPT_TIMEOUT_S: Final = 2.0
"""How long an idempotent append (and its idempotency-bucket read and write) waits for one answer before
trying again. A request in flight to a stream leader that is killed is never answered; waiting the whole
publish timeout (10 s) for it would add 10 s to the election (4-9 s in nats-server). A retry is safe: it
carries the same Nats-Msg-Id, so a first try that was stored is answered as a duplicate."""
_T = TypeVar("_T")


@dataclass
class _Tail:
    seq: int = 0
    hash: str | None = None
    ts: str = ""
    stream_seq: int = 0


@dataclass
class _Pending:
    request: AppendRequest
    future: asyncio.Future[Appended]


@dataclass
class _SessionWriter:
    """Serializes one session's appends; drains whatever queued up into one atomic batch."""

    session: str
    subject: str
    tail: _Tail | None = None
    queue: deque[_Pending] = field(default_factory=deque)
    draining: asyncio.Task[None] | None = None


class Appender:
    """Appends events to the stream. One per process is enough; it is safe for concurrent use.

    Within a session, appends are serialized and pipelined: whatever is waiting is published as one
    atomic JetStream batch guarded by `Nats-Expected-Last-Subject-Sequence`, so two writers can never fork
    a session. A writer that loses the race re-reads the tail and rebuilds its events (bounded retries).
    Different sessions are written concurrently.
    """

    def __init__(
        self,
        client: Client,
        layout: StreamLayout,
        signer: Signer,
        *,
        max_attempts: int = 20,
        publish_timeout: float = 10.0,
        attempt_timeout: float = ATTEMPT_TIMEOUT_S,
        keys: KeyStore | None = None,
        replicas: int = 1,
    ) -> None:
        self._client = client
        self._replicas = replicas  # of the idempotency bucket, when this appender creates it
        self._tails = TailFinder(client, layout, keys)
        self._js = client.jetstream(timeout=publish_timeout)
        self._js_retried = client.jetstream(timeout=min(attempt_timeout, publish_timeout))
        self._layout = layout
        self._sealer = Sealer(signer)
        self._max_attempts = max_attempts
        self._timeout = publish_timeout
        self._writers: dict[str, _SessionWriter] = {}
        self._kv: KeyValue | None = None

    async def append(
        self,
        session: str,
        type: str,
        actor: str,
        payload: dict[str, Any] | None = None,
        *,
        caused_by: Sequence[str] = (),
        idempotency_key: str | None = None,
        expected_seq: int | None = None,
        principal: str | None = None,
    ) -> Event:
        request = AppendRequest(
            session=session,
            type=type,
            actor=actor,
            payload=payload if payload is not None else {},
            caused_by=list(caused_by),
            idempotency_key=idempotency_key,
            expected_seq=expected_seq,
            principal=principal,
        )
        return (await self.append_many([request]))[0]

    async def append_many(self, requests: Sequence[AppendRequest]) -> list[Event]:
        """Append in order; every request is validated before anything is published."""
        return [appended.event for appended in await self.append_positioned(requests)]

    async def append_positioned(self, requests: Sequence[AppendRequest]) -> list[Appended]:
        """`append_many` with positions; the first refusal is raised once every request has its outcome."""
        outcomes = await self.append_settled(requests)
        if refused := next((o for o in outcomes if isinstance(o, BaseException)), None):
            raise refused
        return cast("list[Appended]", outcomes)

    async def append_settled(self, requests: Sequence[AppendRequest]) -> list[Appended | BaseException]:
        """Each request's stored event or refusal, in order. All are validated before any is published; a
        refusal at the tail (a wrong expected seq) refuses the session's batch; other sessions may land."""
        for index, request in enumerate(requests):
            try:
                request.validated()
            except EventValidationError as exc:
                if len(requests) == 1:
                    raise
                raise EventValidationError(f"[{index}].{exc.field}", exc.reason) from None
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[Appended]] = []
        for request in requests:
            writer = self._writer(request.session)
            future: asyncio.Future[Appended] = loop.create_future()
            writer.queue.append(_Pending(request, future))
            futures.append(future)
            if writer.draining is None or writer.draining.done():
                writer.draining = asyncio.create_task(self._drain(writer), name=f"append:{writer.session}")
        return list(await asyncio.gather(*futures, return_exceptions=True))  # every outcome is retrieved

    def _writer(self, session: str) -> _SessionWriter:
        writer = self._writers.get(session)
        if writer is None:
            writer = _SessionWriter(session, self._layout.subject_for(session))
            self._writers[session] = writer
        return writer

    async def _drain(self, writer: _SessionWriter) -> None:
        while writer.queue:
            chunk = _take_chunk(writer.queue, MAX_BATCH if self._layout.atomic_batches else 1)
            try:
                if chunk[0].request.idempotency_key is not None:
                    events = [await self._write_idempotent(writer, chunk[0].request)]
                else:
                    events = await self._write(writer, [p.request for p in chunk])
            except Exception as exc:
                writer.tail = None
                for pending in chunk:
                    if not pending.future.done():
                        pending.future.set_exception(exc)
                continue
            for pending, appended in zip(chunk, events, strict=True):
                if not pending.future.done():
                    pending.future.set_result(appended)

    async def _write(self, writer: _SessionWriter, requests: list[AppendRequest]) -> list[Appended]:
        unavailable: Exception | None = None
        for attempt in range(self._max_attempts):
            events: list[Event] = []
            try:
                with electing():
                    tail = writer.tail or await self._load_tail(writer)
                    _check_expected(writer.session, requests[0].expected_seq, tail.seq)
                    events = await self._sealer.seal(requests, tail.seq, tail.hash, tail.ts)
                    stream_seq = await self._publish(writer.subject, events, tail.stream_seq)
            except TRANSIENT as exc:
                unavailable, writer.tail = exc, None
                if events and await self._reconcile(writer, events, attempt):
                    assert writer.tail is not None  # the reconciled tail: the batch's last event
                    return _positioned(events, writer.tail.stream_seq)
                await unavailable_wait(attempt)
                continue
            except nats.js.errors.APIError as exc:
                if exc.err_code != WRONG_LAST_SEQUENCE:
                    raise await append_refused(self._client, self._layout.name, exc) from exc
                writer.tail = None  # another writer won the race: re-read the tail, rebuild, retry
                await _jitter(attempt)
                continue
            last = events[-1]
            writer.tail = _Tail(last.seq, last.hash, last.ts, stream_seq)
            return _positioned(events, stream_seq)
        if unavailable is not None:
            raise BusUnavailableError(f"NATS did not confirm the append: {unavailable!r}") from unavailable
        raise ConcurrencyError(
            f"session {writer.session}: gave up after {self._max_attempts} attempts to append at the tail"
        )

    async def _reconcile(self, writer: _SessionWriter, events: list[Event], attempt: int) -> bool:
        """After an unknown outcome (lost ack, reconnect), learn from the stream whether the write landed."""
        await _jitter(attempt, base=0.1)
        try:
            stored = await last_event(self._client, self._layout, writer.session)
        except (*TRANSIENT, MalformedMessageError):
            return False
        if stored is not None and stored.event.hash == events[-1].hash:
            writer.tail = _Tail(stored.event.seq, stored.event.hash, stored.event.ts, stored.stream_seq)
            return True
        return False

    async def _load_tail(self, writer: _SessionWriter) -> _Tail:
        found = await self._tails.find(writer.session)
        stored = found.last_valid
        tail = (
            _Tail(stream_seq=found.stream_seq)
            if stored is None
            else _Tail(stored.event.seq, stored.event.hash, stored.event.ts, found.stream_seq)
        )
        writer.tail = tail
        return tail

    async def _publish(self, subject: str, events: list[Event], expected_subject_seq: int) -> int:
        """Publish one event, or several as one atomic batch; returns the stream seq of the last."""
        if len(events) == 1:
            headers = {
                "Nats-Msg-Id": events[0].hash,
                "Nats-Expected-Last-Subject-Sequence": str(expected_subject_seq),
            }
            ack = await self._js.publish(subject, encode_event(events[0]), headers=headers)
            return int(ack.seq)
        batch_id = events[0].hash[:32]
        last_index = len(events) - 1
        first = [("Nats-Expected-Last-Subject-Sequence", str(expected_subject_seq))]
        await publish_many(
            self._client,
            subject,
            [
                (
                    [
                        ("Nats-Batch-Id", batch_id),
                        ("Nats-Batch-Sequence", str(index + 1)),
                        ("Nats-Msg-Id", event.hash),
                        *(first if index == 0 else ()),
                    ],
                    encode_event(event),
                )
                for index, event in enumerate(events[:-1])
            ],
        )
        commit = {
            "Nats-Batch-Id": batch_id,
            "Nats-Batch-Sequence": str(last_index + 1),
            "Nats-Batch-Commit": "1",
            "Nats-Msg-Id": events[-1].hash,
        }
        reply = await self._client.request(
            subject, encode_event(events[-1]), timeout=self._timeout, headers=commit
        )
        response = msgspec.json.decode(reply.data)
        error = response.get("error")
        if error is not None:
            raise nats.js.errors.APIError(
                code=error.get("code"), err_code=error.get("err_code"), description=error.get("description")
            )
        return int(response["seq"])

    async def _write_idempotent(self, writer: _SessionWriter, request: AppendRequest) -> Appended:
        """A repeated idempotency key returns the event the first call appended, if this is the same request
        (`IdempotencyConflictError` if not). The event is compared, not the record that points at it: a
        record that points at another request's event is never taken for this one's."""
        assert request.idempotency_key is not None
        kv = await self._transient_retried(self._idempotency_kv)
        kv_key = f"{writer.session}.{hashlib.sha256(request.idempotency_key.encode()).hexdigest()[:40]}"
        entry = await self._transient_retried(lambda: recall(kv, kv_key))
        stale: int | None = None  # a record naming another session's event (a restored stream): replaced
        if entry is not None and entry.value:
            recorded = (await event_at(self._client, self._layout, int(entry.value))).event
            if recorded.session == writer.session:
                return _repeated(request, recorded, int(entry.value))
            stale = entry.revision
        msg_id = f"{writer.session}:{request.idempotency_key}"
        unavailable: Exception | None = None
        for attempt in range(self._max_attempts):
            try:
                tail = writer.tail or await self._load_tail(writer)
                _check_expected(writer.session, request.expected_seq, tail.seq)
                (event,) = await self._sealer.seal([request], tail.seq, tail.hash, tail.ts)
                headers = {"Nats-Msg-Id": msg_id, "Nats-Expected-Last-Subject-Sequence": str(tail.stream_seq)}
                with electing():
                    ack = await self._js_retried.publish(writer.subject, encode_event(event), headers=headers)
            except TRANSIENT as exc:
                # The tail is kept: re-reading it would wait on the same leaderless stream, and a stale one
                # fails the publish's last-sequence guard and is re-read then.
                unavailable = exc
                await unavailable_wait(attempt)
                continue  # the retry carries the same Nats-Msg-Id, so a stored first try is deduplicated
            except nats.js.errors.APIError as exc:
                if exc.err_code != WRONG_LAST_SEQUENCE:
                    raise await append_refused(self._client, self._layout.name, exc) from exc
                writer.tail = None
                await _jitter(attempt)
                continue
            if ack.duplicate:
                writer.tail = None
                original = (await event_at(self._client, self._layout, int(ack.seq))).event
            else:
                writer.tail = _Tail(event.seq, event.hash, event.ts, int(ack.seq))
                original = event
            await self._transient_retried(partial(remember, kv, kv_key, int(ack.seq), stale))
            return _repeated(request, original, int(ack.seq))
        if unavailable is not None:
            raise BusUnavailableError(f"NATS did not confirm the append: {unavailable!r}") from unavailable
        raise ConcurrencyError(f"session {writer.session}: gave up appending idempotency key after retries")

    async def _transient_retried(self, operation: Callable[[], Awaitable[_T]]) -> _T:
        """An idempotency-bucket read or write: a leader election is waited out, as for the publish."""
        return await retried_while_electing(operation, "the idempotency bucket", self._max_attempts)

    async def _idempotency_kv(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_bucket(
                self._client, IDEMPOTENCY_BUCKET, replicas=self._replicas, js=self._js_retried
            )
        return self._kv


def _take_chunk(queue: deque[_Pending], limit: int) -> list[_Pending]:
    """Queued appends up to `limit`; an idempotency-keyed append always travels alone, and one with an
    expected seq starts a chunk of its own (the condition holds for the whole batch, or none of it lands)."""
    if queue[0].request.idempotency_key is not None:
        return [queue.popleft()]
    chunk = [queue.popleft()]
    while (
        queue
        and len(chunk) < limit
        and queue[0].request.idempotency_key is None
        and queue[0].request.expected_seq is None
    ):
        chunk.append(queue.popleft())
    return chunk


def _repeated(request: AppendRequest, recorded: Event, stream_seq: int) -> Appended:
    """`recorded`, the event appended under `request`'s idempotency key, if `request` is a repeat of the
    request that appended it."""
    differences = request.differences(recorded)
    if differences:
        raise IdempotencyConflictError(recorded, differences)
    return Appended(recorded, Position.of(recorded, stream_seq))


def _positioned(events: list[Event], last_stream_seq: int) -> list[Appended]:
    """One session's events published together, the last stored at `last_stream_seq`: an atomic batch is
    stored as consecutive stream sequences, so each event's follows from the last's."""
    first = last_stream_seq - len(events) + 1
    return [Appended(event, Position.of(event, first + index)) for index, event in enumerate(events)]


def _check_expected(session: str, expected: int | None, actual: int) -> None:
    """Against the tail the publish is guarded by: a stale cached tail fails the publish, is re-read, and
    checked again, so a conflict is never missed."""
    if expected is not None and expected != actual:
        raise WrongExpectedSeqError(session, expected, actual)


async def _jitter(attempt: int, base: float = 0.002) -> None:
    await asyncio.sleep(min(0.5, base * (2 ** min(attempt, 8))) * random.random())
