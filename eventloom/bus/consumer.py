"""Durable pull consumers and ordered stream reads: the mechanics every consumer role builds on."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy

from eventloom.bus.stream import subject_counts
from eventloom.errors import BusUnavailableError, EventloomError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerSpec:
    """What a durable consumer is: its name, the subjects it reads, and its redelivery policy."""

    durable: str
    filter_subjects: Sequence[str]
    ack_policy: AckPolicy = AckPolicy.EXPLICIT
    ack_wait_s: float = 30.0
    max_deliver: int = 5
    backoff_s: Sequence[float] = ()
    start_stream_seq: int | None = None
    max_ack_pending: int = 20_000

    def config(self) -> ConsumerConfig:
        from_seq = self.start_stream_seq is not None and self.start_stream_seq > 1
        return ConsumerConfig(
            durable_name=self.durable,
            name=self.durable,
            ack_policy=self.ack_policy,
            ack_wait=self.ack_wait_s,
            max_deliver=self.max_deliver,
            backoff=list(self.backoff_s) or None,
            filter_subjects=list(self.filter_subjects),
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE if from_seq else DeliverPolicy.ALL,
            opt_start_seq=self.start_stream_seq if from_seq else None,
            max_ack_pending=self.max_ack_pending,
        )


class _PullInbox:
    """Pull requests published by hand onto one wildcard inbox; a callback collects what arrives.

    nats-py's `fetch` builds a task, an id and a timeout per message, which costs more than verifying the
    event; this keeps the per-message cost to a list append. Each request gets its own reply subject, so a
    status that ends an older request (404 no messages, 408 expired, 409 ...) never ends the current wait.
    """

    def __init__(self, client: Client, stream: str, durable: str) -> None:
        self._client = client
        self._api = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._prefix = client.new_inbox()
        self._subscription: Subscription | None = None
        self._buffer: list[Msg] = []
        self._request = 0
        self._wanted = 0
        self._changed = asyncio.Event()
        self._ended: set[int] = set()
        self.hurried = False
        """A reader waits on what this consumer delivers: a lingering fetch ends now (`hurry`)."""

    async def open(self) -> None:
        self._subscription = await self._client.subscribe(
            f"{self._prefix}.*", cb=self._on_message, pending_msgs_limit=-1, pending_bytes_limit=-1
        )

    async def close(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            with contextlib.suppress(nats.errors.Error):
                await subscription.unsubscribe()

    async def _on_message(self, message: Msg) -> None:
        status = message.headers.get("Status") if message.headers else None
        if status is None:
            self._buffer.append(message)
        elif status == "100":
            return  # heartbeat or flow control
        else:
            self._ended.add(int(message.subject.rsplit(".", 1)[-1]))
        if len(self._buffer) >= self._wanted or status is not None:
            self._changed.set()

    async def fetch(self, batch: int, timeout: float, *, lingering: bool = False) -> list[Msg]:
        """Up to `batch` messages; `lingering` (waiting for more to join a batch): ends when hurried."""
        if not self._buffer:
            await self._pull({"batch": batch, "no_wait": True}, batch, timeout=5.0)
        if not self._buffer:
            expires: dict[str, object] = {"batch": batch, "expires": int(timeout * 1e9)}
            await self._pull(expires, 1, timeout=timeout + 1.0, lingering=lingering)
            await asyncio.sleep(0)  # let the rest of what is on the socket land
        taken, self._buffer = self._buffer[:batch], self._buffer[batch:]
        return taken

    def hurry(self) -> None:
        self.hurried = True
        self._changed.set()

    async def _pull(
        self, request: dict[str, object], wanted: int, timeout: float, *, lingering: bool = False
    ) -> None:
        """Ask for messages; return when `wanted` are buffered or this request has ended (or, lingering,
        when hurried)."""
        self._request += 1
        number = self._request
        self._wanted = wanted
        self._changed.clear()
        await self._client.publish(self._api, msgspec.json.encode(request), reply=f"{self._prefix}.{number}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while len(self._buffer) < wanted and number not in self._ended and not (lingering and self.hurried):
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)
            self._changed.clear()
        self._ended.discard(number)


class DurableConsumer:
    """A durable pull consumer bound to one stream: batch fetch, ack, redelivery, replay from a seq."""

    def __init__(self, client: Client, stream: str, spec: ConsumerSpec) -> None:
        self._client = client
        self._js = client.jetstream()
        self.stream = stream
        self.spec = spec
        self._inbox: _PullInbox | None = None

    async def open(self) -> None:
        """Create the consumer if missing, or update the settings an existing one may change, then start
        pulling. An existing consumer keeps where it starts (a rebuild may have moved it past what it
        replayed): its position is the point of being durable, and the server refuses to change it."""
        config = self.spec.config()
        try:
            existing: ConsumerConfig | None = (
                await self._js.consumer_info(self.stream, self.spec.durable)
            ).config
        except nats.js.errors.NotFoundError:
            existing = None
        if existing is not None:
            config.deliver_policy = existing.deliver_policy
            config.opt_start_seq = existing.opt_start_seq
            config.opt_start_time = existing.opt_start_time
        try:
            await self._js.add_consumer(self.stream, config)
        except nats.js.errors.BadRequestError as exc:
            if exc.err_code != 10148:  # 10148: a consumer by that name exists with other settings
                raise
            await self._js.delete_consumer(self.stream, self.spec.durable)
            await self._js.add_consumer(self.stream, self.spec.config())
        self._inbox = _PullInbox(self._client, self.stream, self.spec.durable)
        await self._inbox.open()

    async def fetch(self, batch: int = 256, timeout: float = 1.0, linger_s: float = 0.0) -> list[Msg]:
        """Up to `batch` messages; an empty list when none arrive within `timeout`. Once some came, fewer
        than `batch`, more are awaited until `linger_s` has passed since (fewer, larger batches under a
        trickle)."""
        if self._inbox is None:
            raise RuntimeError("consumer is not open")
        messages = await self._inbox.fetch(batch, timeout)
        if not messages or linger_s <= 0:
            return messages
        loop = asyncio.get_running_loop()
        deadline = loop.time() + linger_s
        inbox = self._inbox
        while len(messages) < batch and not inbox.hurried and (remaining := deadline - loop.time()) > 0:
            messages += await inbox.fetch(batch - len(messages), remaining, lingering=True)
        inbox.hurried = False
        return messages

    def hurry(self) -> None:
        """A reader waits for this consumer's read model to apply an event (`after`): the batch in hand
        is applied without lingering for more (a hurry before the next batch cuts that one's linger)."""
        if self._inbox is not None:
            self._inbox.hurry()

    async def restart_from(self, stream_seq: int) -> None:
        """Recreate the consumer so delivery continues at `stream_seq` (used after a read-model swap)."""
        await self.close()
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await self._js.delete_consumer(self.stream, self.spec.durable)
        self.spec = dataclasses.replace(self.spec, start_stream_seq=stream_seq)
        await self.open()

    async def pending(self) -> int:
        info = await self._js.consumer_info(self.stream, self.spec.durable)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    async def close(self) -> None:
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            await inbox.close()


async def read_stream(
    client: Client,
    stream: str,
    subjects: Sequence[str],
    *,
    start_stream_seq: int = 1,
    batch: int = 1000,
    follow: bool = False,
    idle_timeout: float = 0.5,
) -> AsyncGenerator[Msg, None]:
    """Every message on `subjects` from `start_stream_seq` in stream order, then stop (or keep following).

    An ephemeral, ack-less consumer: cheap, leaves nothing behind, never disturbs durable consumers.
    """
    batches = read_stream_batches(
        client,
        stream,
        subjects,
        start_stream_seq=start_stream_seq,
        batch=batch,
        follow=follow,
        idle_timeout=idle_timeout,
    )
    async with contextlib.aclosing(batches):
        async for messages in batches:
            for message in messages:
                yield message


async def read_stream_batches(
    client: Client,
    stream: str,
    subjects: Sequence[str],
    *,
    start_stream_seq: int = 1,
    batch: int = 1000,
    follow: bool = False,
    idle_timeout: float = 0.5,
) -> AsyncGenerator[list[Msg], None]:
    """`read_stream`, a fetch (of up to `batch` messages) at a time: for a reader that checks each
    message, so that it may check a whole fetch in a worker thread."""
    js = client.jetstream()
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        filter_subjects=list(subjects),
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start_stream_seq > 1 else DeliverPolicy.ALL,
        opt_start_seq=start_stream_seq if start_stream_seq > 1 else None,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    if start_stream_seq > 1 or follow:
        info = await js.add_consumer(stream, config)
    else:
        info = await _complete_consumer(client, stream, config, subjects)
    inbox = _PullInbox(client, stream, info.name)
    await inbox.open()
    try:
        remaining = int(info.num_pending or 0)
        stalled_since: float | None = None
        while follow or remaining > 0:
            messages = await inbox.fetch(batch, idle_timeout)
            if not messages and not follow:
                remaining = await _still_pending(js, stream, info.name, remaining, stalled_since)
                stalled_since = stalled_since or asyncio.get_running_loop().time()
                continue
            stalled_since = None
            if messages:
                remaining = int(messages[-1].metadata.num_pending)
                yield messages
    finally:
        await inbox.close()
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            await js.delete_consumer(stream, info.name)  # otherwise it expires after inactive_threshold


_COMPLETE_ATTEMPTS: Final = 8


async def _complete_consumer(
    client: Client, stream: str, config: ConsumerConfig, subjects: Sequence[str]
) -> ConsumerInfo:
    """An ephemeral consumer that has every message the stream's leader counts on `subjects`.

    Right after a fault, a consumer placed on a replica that says it is current before it has every message
    (seen after a truncated `.blk`) counts fewer, reads fewer, and calls that the end: such a consumer is
    made again a moment later. After `_COMPLETE_ATTEMPTS` the last one is read as it is (the callers that
    must not read short, `verify` and the ledger mirror, read again when a session comes back short)."""
    js = client.jetstream()
    info = await js.add_consumer(stream, config)
    for attempt in range(_COMPLETE_ATTEMPTS):
        try:
            counted = [await subject_counts(client, stream, subject) for subject in subjects]
        except EventloomError:
            return info  # the leader did not say (electing): nothing to compare with
        expected = sum(sum(counts.values()) for counts in counted)
        if int(info.num_pending or 0) >= expected:
            return info
        log.warning(
            "stream %s: a new consumer counts %s of the leader's %s messages on %s; made again",
            stream,
            info.num_pending,
            expected,
            ", ".join(subjects),
        )
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            await js.delete_consumer(stream, info.name)
        await asyncio.sleep(0.2 * (attempt + 1))
        info = await js.add_consumer(stream, config)
    return info


_STALL_LIMIT_S: Final = 20.0


async def _still_pending(
    js: JetStreamContext, stream: str, consumer: str, remaining: int, stalled_since: float | None
) -> int:
    """After a fetch that brought nothing while `remaining` were due: how many the consumer still has to
    deliver (0 ends the read: they were removed meanwhile). A read never ends short in silence: a consumer
    whose replica is catching up is waited for, and one that delivers nothing for `_STALL_LIMIT_S` fails
    the read, as a verify or a repair reading too little would report (or re-publish) what is there."""
    pending = int((await js.consumer_info(stream, consumer)).num_pending or 0)
    stalled_s = asyncio.get_running_loop().time() - stalled_since if stalled_since is not None else 0.0
    if pending and stalled_s > _STALL_LIMIT_S:
        raise BusUnavailableError(
            f"stream {stream}: the read delivered nothing for {stalled_s:.0f}s with {pending} messages "
            f"still to come (of {remaining} expected)"
        )
    return pending
