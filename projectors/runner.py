"""Running a projector: one durable pull consumer, batched apply, ordered per session, exactly-once effects.

Delivery is at-least-once; the projector records the applied seq per session in the same write as the
projection and the runner skips anything at or below it, so effects happen once. An event that keeps
failing is dead-lettered with the projector, the attempts and the error, and the consumer goes on; until
then the rest of its session waits behind it, so a session is never applied out of order. A read model
that is down (ReadModelUnavailableError) pauses the runner: nothing is acknowledged or dead-lettered.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg

from eventloom.bus.consumer import ConsumerSpec, DurableConsumer
from eventloom.bus.stream import StreamLayout
from eventloom.citations import KnownHashes
from eventloom.dlq import resolve_dead_letter, take_retry_requests
from eventloom.errors import ReadModelBrokenError
from eventloom.event import decode_event
from eventloom.keys import KeyStore
from eventloom.stages import StageTimes
from eventloom.tail import event_at
from eventloom.trust import UNVERIFIED, EventVerifier
from projectors.batches import CheckedBatch, FetchedEvent, sort_batch
from projectors.dead_letters import DeadLetterBox
from projectors.keepalive import InProgress
from projectors.lease import ConsumerLease, Fenced
from projectors.partitions import consumer_name
from projectors.protocol import Idles, Profiled, Projector, Rebuildable, SkipsSessions
from projectors.runner_options import RunnerOptions, RunnerStats, TroubleListener
from projectors.status import StatsPublisher
from projectors.unavailable import StoppedWhileUnavailable, UnavailableWaits

__all__ = ["ProjectorRunner", "RunnerOptions", "RunnerStats", "TroubleListener"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class ProjectorRunner:
    """Feeds a `Projector` from the stream until `stop` is set; finishes the batch in hand before stopping."""

    def __init__(
        self,
        client: Client,
        layout: StreamLayout,
        projector: Projector,
        *,
        partitions: list[int] | None = None,
        options: RunnerOptions | None = None,
        role: str = "projector",
        consumer: str | None = None,
        keys: KeyStore,
        on_trouble: TroubleListener | None = None,
        lease: ConsumerLease | None = None,
        known: KnownHashes | None = None,
    ) -> None:
        self._client = client
        self.lease = lease
        """Held while this worker applies; without one (rebuilds), it applies whenever it runs."""
        self._verifier = EventVerifier(keys, client, layout, known)
        self._layout = layout
        self.projector = projector
        self._next_retry_check = 0.0
        self._next_swap_check = 0.0
        self.options = options or RunnerOptions()
        self.consumer = consumer or consumer_name(role, projector.name, partitions)
        self.adopt_swaps = role == "projector"  # a rebuild's own runner builds the generation, never follows
        self._consumer = DurableConsumer(
            client,
            layout.name,
            ConsumerSpec(
                durable=self.consumer,
                filter_subjects=layout.partition_subjects(partitions),
                ack_wait_s=self.options.ack_wait_s,
                max_deliver=-1,  # the runner counts attempts and dead-letters itself
            ),
        )
        self._stats_publisher = StatsPublisher(client, self.consumer)
        self.in_order = role != "producer"  # producers are fenced per derivation; order does not matter
        self.stats = RunnerStats()
        self._store = UnavailableWaits(
            self.consumer, self.options.unavailable_retry_s, self.stats, on_trouble
        )
        self._letters = DeadLetterBox(
            client,
            self.consumer,
            self.stats,
            max_deliver=self.options.max_deliver,
            backoff_s=self.options.backoff_s,
        )
        self.ready = asyncio.Event()
        self._in_flight: asyncio.Task[None] | None = None  # the batch being written
        self.in_progress = InProgress(self.options.ack_wait_s, alive=lambda: lease is None or lease.held)

    @property
    def trouble(self) -> str | None:
        """Why the read model cannot be written now (None: it can)."""
        return self._store.trouble

    async def run(self, stop: asyncio.Event) -> None:
        self._store.stop = stop
        try:
            if self.lease is not None:
                await self._run_leased(self.lease, stop)
                return
            await self._with_store(self.projector.open)  # a read model that is down at start is waited for
            try:
                await self._run_active(stop)
            finally:
                await self.projector.close()
        except StoppedWhileUnavailable as stopped:
            log.info("%s", stopped)  # what it held is delivered again when a worker next runs

    async def _run_leased(self, lease: ConsumerLease, stop: asyncio.Event) -> None:
        """Stand by until the consumer's lease is ours, apply while it is, stand by again if fenced.

        A read model kept in generations lives in this data dir, one writer per file (LadybugDB): it is
        opened once the lease is ours and closed when it is lost, so a standby on this host can take it.
        A shared one (Neo4j) is opened at once: a standby serves reads from it while it waits."""
        shared = not isinstance(self.projector, Rebuildable)
        if shared:
            await self._with_store(self.projector.open)
            self.ready.set()
        try:
            while await lease.acquire(stop):
                keeping = asyncio.create_task(lease.keep())
                try:
                    if not shared:
                        await self._with_store(self.projector.open)
                    try:
                        await self._run_active(stop, took_over=lease.took_over)
                    finally:
                        if not shared:
                            await self.projector.close()
                except Fenced:
                    self.stats.fenced += 1  # what it held goes to the new holder; nothing acknowledged
                finally:
                    keeping.cancel()
                if stop.is_set():
                    break
        finally:
            await lease.release()
            self.ready.clear()
            if shared:
                await self.projector.close()

    async def _run_active(self, stop: asyncio.Event, *, took_over: bool = False) -> None:
        """Apply until `stop` (finishing the batch in hand), or until fenced (abandoning it)."""
        await self._consumer.open()
        if took_over:
            await self._reclaim()
        await self._verifier.open()
        await self._letters.load()
        if self.adopt_swaps:
            await self._follow_swap()  # a swap may have happened while this worker was down
        self.ready.set()
        keepalive = asyncio.create_task(self.in_progress.run())
        try:
            await self._pump(stop)
        finally:
            keepalive.cancel()
            in_flight, self._in_flight = self._in_flight, None
            if in_flight is not None and not in_flight.done():
                in_flight.cancel()
                with contextlib.suppress(asyncio.CancelledError, Fenced):
                    await in_flight
            elif in_flight is not None and not in_flight.cancelled():
                _abandoned(self.consumer, in_flight.exception())  # the pump stopped first (fenced, say)
            if self.lease is None or isinstance(self.projector, Rebuildable):
                self.ready.clear()
            self._verifier.close()
            await self._consumer.close()

    async def _pump(self, stop: asyncio.Event) -> None:
        """Fetch, check and apply batches until `stop`; the batch in hand is finished (and acknowledged)."""
        while not stop.is_set():
            await self._fence()  # a fenced worker must not even pull: what it pulls, others wait for
            with self.stats.stages.timed("fetch"):
                messages = await self._consumer.fetch(
                    self.options.batch, timeout=self.options.fetch_timeout_s, linger_s=self.options.linger_s
                )
            self.in_progress.hold(messages)
            # the next batch is decoded and verified while the previous one is written (the store writes
            # on a thread of its own): the two halves of the work overlap
            checked = await self._check(messages) if messages else None
            await self._finish_in_flight()
            if checked is not None:
                self._in_flight = asyncio.create_task(self._apply_and_report(checked, messages))
            else:
                await self._report_stats()
                if isinstance(self.projector, Idles):
                    await self._with_store(self.projector.idle)  # caught up: housekeeping now
            if self._housekeeping_due():
                await self._finish_in_flight()
                await self._retry_requested()
                await self._follow_swap()
        await self._finish_in_flight()

    async def _finish_in_flight(self) -> None:
        finishing, self._in_flight = self._in_flight, None
        if finishing is not None:
            await finishing

    async def _fence(self) -> None:
        """Raise `Fenced` once another worker may have taken this consumer's lease."""
        if self.lease is not None and not await self.lease.still_held():
            raise Fenced(f"{self.consumer}: the lease is lost")

    async def _reclaim(self) -> None:
        """The previous holder did not let go (killed, stalled, cut off): what it held unacknowledged is
        delivered again now rather than when its ack wait runs out. The consumer restarts after its ack
        floor; what was applied since is skipped at the checkpoints."""
        info = await self._client.jetstream().consumer_info(self._layout.name, self.consumer)
        if info.num_ack_pending:
            floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
            log.info("%s: taking over %s unacknowledged event(s)", self.consumer, info.num_ack_pending)
            await self._consumer.restart_from(floor + 1)

    async def _apply_and_report(self, checked: CheckedBatch, messages: list[Msg]) -> None:
        try:
            await self._apply_checked(checked)
        finally:
            self.in_progress.release(messages)
        await self._report_stats()

    async def _report_stats(self) -> None:
        await self._stats_publisher.publish(self.stats.applied, self.stats.dead_lettered, self.stats.refused)

    def _housekeeping_due(self) -> bool:
        now = time.monotonic()
        follows_swaps = self.adopt_swaps and isinstance(self.projector, Rebuildable)
        return now >= self._next_retry_check or (follows_swaps and now >= self._next_swap_check)

    def hurry(self) -> None:
        """A reader waits on this runner's read model (`after`): apply what came without lingering."""
        self._consumer.hurry()

    def stage_times(self) -> StageTimes:
        """Where this runner's time went: its own stages, then the projector's (`apply.<stage>`)."""
        if isinstance(self.projector, Profiled):
            return self.stats.stages.merged(self.projector.stage_times(), prefix="apply.")
        return self.stats.stages.copy()

    async def process(self, messages: list[Msg]) -> None:
        """Apply one fetched batch, then acknowledge what was applied or skipped."""
        await self._apply_checked(await self._check(messages))

    async def _check(self, messages: list[Msg]) -> CheckedBatch:
        """Decode and verify a batch (in stream order); nothing is applied or acknowledged yet, except what
        cannot be an event (dead-lettered) and the sessions this projector skips."""
        stages = self.stats.stages
        items: list[FetchedEvent] = []
        with stages.timed("decode"):
            for message in messages:
                try:
                    items.append(FetchedEvent(message, decode_event(message.data)))
                except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                    await self._letters.letter(message, None, f"not a valid event: {exc}")
        items = await self._without_skipped_sessions(items)
        with stages.timed("verify"):
            verdicts = await self._verifier.verify([item.event for item in items]) if items else []
        for index, item in enumerate(items):
            session, subject = item.event.session, item.message.subject
            if verdicts[index] is None and subject.rsplit(".", 1)[-1] != session:
                verdicts[index] = f"{UNVERIFIED}: an event of session {session} on {subject}"
        return CheckedBatch(items, verdicts)

    async def _apply_checked(self, checked: CheckedBatch) -> None:
        """Order a checked batch against the read model's checkpoints, apply what is due, acknowledge."""
        self.stats.batches += 1
        stages = self.stats.stages
        with stages.timed("checkpoint_read"):
            applied = await self._applied_seqs(checked.items)
        batch = sort_batch(checked, applied, self._letters.dead, in_order=self.in_order)
        for item in batch.applied_already:
            self.stats.skipped += 1
            await item.message.ack()
        for item in batch.waiting:
            await item.message.nak(delay=self.options.backoff_s[0])
        for item, reason in batch.refused:
            await self._letters.refuse(item, reason)
        ready = batch.ready
        if not ready:
            return
        await self._fence()  # the checkpoint in the write's transaction covers a write already under way
        try:
            with stages.timed("apply"):
                await self._with_store(lambda: self.projector.apply([i.event for i in ready]))
        except ReadModelBrokenError:
            raise
        except Exception:
            await self._apply_one_by_one(ready)
            return
        with stages.timed("ack"):
            for item in ready:
                await item.message.ack()
        self.stats.applied += len(ready)

    async def _follow_swap(self) -> None:
        """After `eventloom rebuild` swapped in a new generation: reopen on it and continue where it ends."""
        projector = self.projector
        now = time.monotonic()
        if not self.adopt_swaps or not isinstance(projector, Rebuildable) or now < self._next_swap_check:
            return
        self._next_swap_check = now + self.options.retry_check_s
        generations = projector.generations
        swap = await asyncio.to_thread(generations.last_swap)
        if swap is None or await asyncio.to_thread(generations.adopted, self.consumer) == swap.generation:
            return
        log.info("%s: continuing on rebuilt generation %s", self.consumer, swap.generation)
        if projector.generation != swap.generation:
            await projector.close()
            await projector.open()
        await self._consumer.restart_from(swap.resume_stream_seq)
        await asyncio.to_thread(generations.adopt, self.consumer, swap.generation)

    async def _retry_requested(self) -> None:
        """Apply dead letters that `eventloom dlq retry` queued for this consumer; forget those that work."""
        now = time.monotonic()
        if now < self._next_retry_check:
            return
        self._next_retry_check = now + self.options.retry_check_s
        for stream_seq in await take_retry_requests(self._client, self.consumer):
            event = (await event_at(self._client, self._layout, stream_seq)).event
            (refusal,) = await self._verifier.verify([event])
            if refusal is not None:  # a retry is for a read model that failed, never for a refused event
                log.warning("%s: not retrying stream seq %s: %s", self.consumer, stream_seq, refusal)
                continue
            applied = await self._with_store(lambda e=event: self.projector.applied_seqs([e.session]))  # type: ignore[misc]
            if event.seq > applied.get(event.session, 0):
                try:
                    await self._with_store(lambda e=event: self.projector.apply([e]))  # type: ignore[misc]
                except Exception as exc:
                    log.warning("%s: retry of stream seq %s failed again: %s", self.consumer, stream_seq, exc)
                    continue
                self.stats.applied += 1
            await resolve_dead_letter(self._client, self.consumer, stream_seq)
            self.stats.retried += 1

    async def _without_skipped_sessions(self, items: list[FetchedEvent]) -> list[FetchedEvent]:
        skipped = (
            self.projector.skipped_sessions if isinstance(self.projector, SkipsSessions) else frozenset()
        )
        if not skipped:
            return items
        kept = []
        for item in items:
            if item.event.session in skipped:
                self.stats.skipped += 1
                await item.message.ack()
            else:
                kept.append(item)
        return kept

    async def _applied_seqs(self, items: list[FetchedEvent]) -> dict[str, int]:
        sessions = sorted({item.event.session for item in items})
        return await self._with_store(lambda: self.projector.applied_seqs(sessions))

    async def _apply_one_by_one(self, items: list[FetchedEvent]) -> None:
        failed_sessions: set[str] = set()
        for item in items:
            event = item.event
            if event.session in failed_sessions:
                await item.message.nak(delay=self.options.backoff_s[0])  # waits behind the failed one
                continue
            await self._fence()
            try:
                await self._with_store(lambda event=event: self.projector.apply([event]))  # type: ignore[misc]
            except ReadModelBrokenError:
                raise
            except Exception as exc:
                if not await self._letters.failed(item, exc):
                    failed_sessions.add(event.session)
                continue
            self.stats.applied += 1
            await item.message.ack()

    async def _with_store(self, call: Callable[[], Awaitable[T]]) -> T:
        """Retry while the read model is unavailable: pause, never ack, never dead-letter."""
        return await self._store.call(call)


def _abandoned(consumer: str, error: BaseException | None) -> None:
    """The batch in flight had ended when the pump stopped: nothing of it was acknowledged."""
    if error is not None and not isinstance(error, Fenced | StoppedWhileUnavailable):
        log.warning("%s: the batch in flight failed as the worker stopped: %s", consumer, error)
