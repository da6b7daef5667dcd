"""A bystander's view of one consumer: every pull request, delivery and answer its workers exchange with
the server, seen by subscribing to the consumer's API and ack subjects (the admin may). Used by
bench/failover.py and tests/test_projector_failover.py to time a takeover from outside the workers."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

CONSUMER = "projector-graph"
TERMINAL = (b"+ACK", b"-NAK", b"+TERM")
ACK = b"+ACK"  # nats-py acknowledges with an empty payload, which the server takes as +ACK


@dataclass
class Delivery:
    stream_seq: int
    at: float  # time.monotonic() when the watch saw it
    answer: bytes | None = None  # the first terminal answer: +ACK, -NAK, +TERM
    answered_at: float | None = None
    in_progress: int = 0  # +WPI answers (a slow batch kept alive)


@dataclass
class ConsumerWatch:
    """Pull requests, deliveries and answers of `consumer` on `stream`, as seen by a bystander: each worker
    pulls on an inbox of its own (so a pull names its worker); a delivery's ack subject is unique and names
    its stream seq; an answer goes to that subject."""

    client: Client
    stream: str
    consumer: str
    workers: list[str] = field(default_factory=list)  # inbox prefixes, in the order they first pulled
    deliveries: dict[str, Delivery] = field(default_factory=dict)  # by ack subject
    _subscriptions: list[Subscription] = field(default_factory=list)

    async def start(self) -> None:
        api = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.consumer}"
        self._subscriptions = [
            await self.client.subscribe(api, cb=self._on_pull),
            await self.client.subscribe("_INBOX.>", cb=self._on_inbox, pending_msgs_limit=-1,
                                        pending_bytes_limit=-1),
            await self.client.subscribe(f"$JS.ACK.{self.stream}.{self.consumer}.>", cb=self._on_answer,
                                        pending_msgs_limit=-1, pending_bytes_limit=-1),
        ]  # fmt: skip
        await self.client.flush()

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def _on_pull(self, message: Msg) -> None:
        worker = message.reply.rsplit(".", 1)[0]
        if worker and worker not in self.workers:
            self.workers.append(worker)

    async def _on_inbox(self, message: Msg) -> None:
        if message.reply.startswith(f"$JS.ACK.{self.stream}.{self.consumer}."):
            tokens = message.reply.split(".")  # ... <delivered>.<stream seq>.<consumer seq>.<time>.<pending>
            self.deliveries[message.reply] = Delivery(stream_seq=int(tokens[-4]), at=time.monotonic())

    async def _on_answer(self, message: Msg) -> None:
        delivery = self.deliveries.get(message.subject)
        if delivery is None:
            return
        if message.data.startswith(b"+WPI"):
            delivery.in_progress += 1
        elif delivery.answer is None and (not message.data or message.data.startswith(TERMINAL)):
            delivery.answer = message.data[:4] or ACK
            delivery.answered_at = time.monotonic()

    def unanswered(self, before: float) -> int:
        return sum(d.answer is None and d.at < before for d in self.deliveries.values())

    def acked(self) -> int:
        return sum(d.answer == ACK for d in self.deliveries.values())

    def takeover(self, killed_at: float) -> dict[str, Any]:
        """What the worker killed at `killed_at` held (delivered before, never answered); when the next
        holder had the dead one's events in hand (`takeover_s`: the first of them delivered again), first
        acknowledged anything, and had
        acknowledged again all the dead one held (`recovered_s`; call once the consumer has drained)."""
        held = {d.stream_seq for d in self.deliveries.values() if d.at < killed_at and d.answer is None}
        after = [d for d in self.deliveries.values() if d.at > killed_at]
        acks = [d.answered_at for d in after if d.answer == ACK and d.answered_at is not None]
        taken: dict[int, float] = {}
        for d in after:
            if d.stream_seq in held and d.answer == ACK and d.answered_at is not None:
                taken[d.stream_seq] = min(taken.get(d.stream_seq, d.answered_at), d.answered_at)
        return {
            "held": len(held),
            "taken_over": len(taken),
            "takeover_s": _after(killed_at, min((d.at for d in after if d.stream_seq in held), default=None)),
            "first_ack_s": _after(killed_at, min(acks, default=None)),
            "recovered_s": _after(killed_at, max(taken.values())) if held and held <= set(taken) else None,
        }

    def expired_while_alive(self, killed_at: float) -> int:
        """Deliveries handed out again while still unanswered by a live worker (its ack wait passed without
        word from it). Should be 0."""
        handed: dict[int, list[float]] = {}
        for d in self.deliveries.values():
            handed.setdefault(d.stream_seq, []).append(d.at)
        expired = 0
        for d in self.deliveries.values():
            if d.answer is None and d.at < killed_at:
                continue  # the dead worker's
            answered = d.answered_at if d.answered_at is not None else float("inf")
            expired += any(d.at < at < answered for at in handed[d.stream_seq])
        return expired

    def in_progress_acks(self) -> int:
        return sum(d.in_progress for d in self.deliveries.values())


def _after(start: float, at: float | None) -> float | None:
    return None if at is None else round(at - start, 3)


# --- workers ------------------------------------------------------------------------------------------------
