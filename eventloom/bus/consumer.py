"""Durable pull consumers and ordered stream reads: the mechanics every consumer role builds on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy


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


async def fetch_batch(
    subscription: JetStreamContext.PullSubscription, batch: int, timeout: float
) -> list[Msg]:
    """Up to `batch` messages; an empty list when none arrive in time.

    nats-py raises TimeoutError on an empty fetch; this is the one place that quirk is absorbed.
    """
    try:
        messages: list[Msg] = await subscription.fetch(batch, timeout=timeout)
    except (nats.errors.TimeoutError, TimeoutError):
        return []
    return messages


class DurableConsumer:
    """A durable pull consumer bound to one stream: batch fetch, ack, redelivery, replay from a seq."""

    def __init__(self, js: JetStreamContext, stream: str, spec: ConsumerSpec) -> None:
        self._js = js
        self.stream = stream
        self.spec = spec
        self._subscription: JetStreamContext.PullSubscription | None = None

    async def open(self) -> None:
        """Create the consumer if missing (or update its config), then bind a pull subscription."""
        try:
            await self._js.add_consumer(self.stream, self.spec.config())
        except nats.js.errors.BadRequestError as exc:
            if exc.err_code != 10148:  # 10148: a consumer by that name exists with other settings
                raise
            await self._js.delete_consumer(self.stream, self.spec.durable)
            await self._js.add_consumer(self.stream, self.spec.config())
        self._subscription = await self._js.pull_subscribe_bind(durable=self.spec.durable, stream=self.stream)

    async def fetch(self, batch: int = 256, timeout: float = 1.0) -> list[Msg]:
        if self._subscription is None:
            raise RuntimeError("consumer is not open")
        return await fetch_batch(self._subscription, batch, timeout)

    async def pending(self) -> int:
        info = await self._js.consumer_info(self.stream, self.spec.durable)
        return int(info.num_pending or 0) + int(info.num_ack_pending or 0)

    async def close(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            with contextlib.suppress(nats.errors.Error):  # closing or draining: the server drops it anyway
                await subscription.unsubscribe()


async def read_stream(
    client: Client,
    stream: str,
    subjects: Sequence[str],
    *,
    start_stream_seq: int = 1,
    batch: int = 1000,
    follow: bool = False,
    idle_timeout: float = 0.5,
) -> AsyncIterator[Msg]:
    """Every message on `subjects` from `start_stream_seq` in stream order, then stop (or keep following).

    An ephemeral, ack-less consumer: cheap, leaves nothing behind, never disturbs durable consumers.
    """
    js = client.jetstream()
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        filter_subjects=list(subjects),
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start_stream_seq > 1 else DeliverPolicy.ALL,
        opt_start_seq=start_stream_seq if start_stream_seq > 1 else None,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    info = await js.add_consumer(stream, config)
    subscription = await js.pull_subscribe_bind(consumer=info.name, stream=stream)
    try:
        remaining = int(info.num_pending or 0)
        while follow or remaining > 0:
            messages = await fetch_batch(subscription, batch, idle_timeout)
            if not messages and not follow:
                return
            for message in messages:
                remaining = int(message.metadata.num_pending)
                yield message
            if not messages:
                await asyncio.sleep(0)
    finally:
        with contextlib.suppress(nats.errors.Error):
            await subscription.unsubscribe()
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error):
            await js.delete_consumer(stream, info.name)  # otherwise it expires after inactive_threshold
