"""The ledger mirror: a durable consumer that verifies every event and appends it to the JSONL ledger."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy

from eventloom.bus.consumer import ConsumerSpec, DurableConsumer, read_stream
from eventloom.bus.stream import StreamLayout, subject_counts
from eventloom.chain import GENESIS, ChainBreak, ChainTip, check_link
from eventloom.checks import EventChecker
from eventloom.dlq import DeadLetter, dead_letter
from eventloom.event import Event, decode_event, encode_event
from eventloom.keys import Keyring, KeyStore, Signer
from eventloom.ledger.disk_full import DiskFullWatch, TroubleListener, is_disk_full
from eventloom.ledger.files import (
    LedgerWriter,
    ledger_path,
    ledger_sessions,
    read_tip,
    record_incident,
    repair_torn_tail,
)
from eventloom.ledger.manifest import ManifestError, losses, read_manifest, sign_manifest, write_manifest

MIRROR_CONSUMER = "ledger-mirror"
MANIFEST_EVERY_S = 1.0
_REFETCH_ATTEMPTS: Final = 5
_REFETCH_WAIT_S: Final = 0.5
log = logging.getLogger(__name__)


@dataclass
class _Incoming:
    """A fetched message; `malformed` says why it was rejected before verification, `error` why after."""

    message: Msg
    event: Event | None
    malformed: str | None = None
    error: str | None = None
    unknown_key: bool = False


@dataclass
class MirrorStats:
    written: int = 0
    dead_lettered: int = 0
    repaired_bytes: int = 0
    refetched: int = 0
    sessions: set[str] = field(default_factory=set)
    incidents: list[str] = field(default_factory=list)


class LedgerMirror:
    """Keeps `<ledger_dir>/<session>.jsonl` equal to the stream, verifying chain and signature first.

    Lines are fsynced once per batch and only then acknowledged, so a crash loses nothing: what was not
    acknowledged is redelivered, and a torn last line is cut on start and refetched from the stream. When
    the ledger cannot grow (a full disk), what was partly written is cut back at once and the batch tried
    again until it can (`eventloom.ledger.disk_full`); `on_trouble` hears why meanwhile.
    """

    def __init__(
        self,
        client: Client,
        layout: StreamLayout,
        keys: KeyStore,
        ledger_dir: Path,
        *,
        batch: int = 1000,
        consumer: str = MIRROR_CONSUMER,
        on_trouble: TroubleListener | None = None,
    ) -> None:
        self._client = client
        self._layout = layout
        self._keys = keys
        self._ledger_dir = ledger_dir
        self._batch = batch
        self._consumer = DurableConsumer(
            client,
            layout.name,
            ConsumerSpec(
                durable=consumer,
                filter_subjects=layout.partition_subjects(),
                ack_policy=AckPolicy.ALL,
                ack_wait_s=60.0,
                max_deliver=-1,
            ),
        )
        self._name = consumer
        self._tips: dict[str, ChainTip] = {}
        self._writer = LedgerWriter(ledger_dir)
        self._keyring = Keyring()
        self.stats = MirrorStats()
        self.ready = asyncio.Event()
        self._checker = EventChecker()
        self._signer: Signer | None = None
        self._manifest_at = float("-inf")
        self.disk = DiskFullWatch(ledger_dir, on_trouble)
        self._stop = asyncio.Event()
        self._open_gaps: set[str] = set()  # sessions whose gap reading the stream again did not fill

    async def start(self) -> None:
        """Repair torn tails, load every session's tip, report what the files lost against the signed
        manifest, refetch what they lack, sign a fresh manifest, open the consumer."""
        self._keyring = await asyncio.to_thread(self._keys.load_keyring)
        self._signer = await asyncio.to_thread(self._keys.active_signer)
        repaired, tips = await asyncio.to_thread(_recover_files, self._ledger_dir)
        self.stats.repaired_bytes += repaired
        self._tips = tips
        await asyncio.to_thread(self._check_manifest)
        counts = await subject_counts(self._client, self._layout.name, self._layout.all_subjects)
        for subject, count in counts.items():
            session = subject.rsplit(".", 1)[-1]
            if count > self._tips.get(session, GENESIS).seq:
                await self._refetch_once(session, before_stream_seq=None)
        await asyncio.to_thread(self._write_manifest)
        await self._consumer.open()

    def _check_manifest(self) -> None:
        """Runs in a worker thread, before anything is refetched: a loss is reported, never just repaired."""
        try:
            manifest = read_manifest(self._ledger_dir, self._keyring)
        except ManifestError as exc:
            self._incident(str(exc))
            return
        if manifest is None:
            if self._tips:
                self._incident(
                    "the ledger has session files but no signed manifest (deleted, or written before "
                    "manifests existed): a loss before now cannot be told; a new one is signed"
                )
            return
        for loss in losses(manifest, self._tips):
            self._incident(f"{loss}; the missing events are refetched from the stream")

    def _incident(self, what: str) -> None:
        log.error("ledger: %s", what)
        self.stats.incidents.append(what)
        record_incident(self._ledger_dir, what)

    def _write_manifest(self) -> None:
        if self._signer is None:
            return
        try:
            write_manifest(self._ledger_dir, sign_manifest(self._tips, self._signer))
        except OSError as exc:
            if not is_disk_full(exc):
                raise
            log.warning("ledger: the manifest is not renewed while the disk is full: %s", exc.strerror)
            return  # the old one names no more than the files hold; the next batch tries again
        self._manifest_at = time.monotonic()

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        await self.start()
        self.ready.set()
        try:
            while not stop.is_set():
                messages = await self._consumer.fetch(self._batch, timeout=0.5)
                if messages:
                    await self.apply(messages)
        finally:
            self.ready.clear()
            await asyncio.to_thread(self._writer.close)
            await asyncio.to_thread(self._write_manifest)
            await self._consumer.close()

    async def apply(self, messages: list[Msg]) -> None:
        """Verify and write a fetched batch, refetching from the stream where the ledger has a gap."""
        incoming = [_decode(message, self._layout) for message in messages]
        expected: dict[str, int] = {}
        segment_start = 0
        for index, item in enumerate(incoming):
            event = item.event
            if event is None or item.malformed is not None:
                continue
            session = event.session
            next_seq = expected.get(session) or self._tips.get(session, GENESIS).seq + 1
            if event.seq > next_seq:
                await self._verify_and_write(incoming[segment_start:index])
                segment_start = index
                await self._refetch(session, item.message.metadata.sequence.stream, wanted_seq=event.seq)
                next_seq = self._tips.get(session, GENESIS).seq + 1
            expected[session] = max(next_seq, event.seq + 1)
        await self._verify_and_write(incoming[segment_start:])
        await messages[-1].ack()

    async def _verify_and_write(self, incoming: list[_Incoming]) -> None:
        if not incoming:
            return
        failures = await self._write(incoming)
        if any(item.unknown_key for item in failures):
            self._keyring = await asyncio.to_thread(self._keys.load_keyring)  # a key may have been added
            retry = [_Incoming(i.message, i.event) for i in failures if i.malformed is None]
            failures = [i for i in failures if i.malformed is not None]
            failures += await self._write(retry)
        for item in failures:
            await self._dead_letter(item)

    async def _write(self, incoming: list[_Incoming]) -> list[_Incoming]:
        """`_write_verified`, tried again while the disk is full (nothing is acknowledged meanwhile)."""
        while True:
            try:
                failures = await asyncio.to_thread(self._write_verified, incoming)
            except OSError as exc:
                if not is_disk_full(exc) or self._stop.is_set():
                    raise
                wait = await self.disk.failed(exc, self._writer.cut_bytes)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), timeout=wait)
                continue
            await self.disk.written()
            return failures

    def _write_verified(self, incoming: list[_Incoming]) -> list[_Incoming]:
        """Runs in a worker thread: the tips are only touched here while it runs."""
        failures = [item for item in incoming if item.event is None or item.malformed is not None]
        candidates = [item for item in incoming if item.event is not None and item.malformed is None]
        self_checks = self._checker.check_all(
            [item.event for item in candidates if item.event], self._keyring
        )
        pending: dict[str, list[bytes]] = {}
        before: dict[str, ChainTip | None] = {}  # each written session's tip before this batch
        for item, self_break in zip(candidates, self_checks, strict=True):
            event = item.event
            assert event is not None
            tip = self._tips.get(event.session, GENESIS)
            if event.seq < tip.seq or (event.seq == tip.seq and event.hash == tip.hash):
                continue  # already in the ledger: a redelivery
            try:
                if event.seq == tip.seq:
                    raise ChainBreak(
                        event.session, event.seq, f"fork: the ledger holds another event at seq {tip.seq}"
                    )
                new_tip = check_link(event, tip)
                if self_break is not None:
                    raise self_break
            except ChainBreak as exc:
                item.error, item.unknown_key = exc.reason, exc.unknown_key
                failures.append(item)
                continue
            before.setdefault(event.session, self._tips.get(event.session))
            self._tips[event.session] = new_tip
            pending.setdefault(event.session, []).append(item.message.data)
        try:
            for session, lines in pending.items():
                self._writer.write(session, lines)
            self._writer.sync()
        except OSError:
            _restore(self._tips, before)  # the writer cut the files back to these
            raise
        for session, lines in pending.items():
            self.stats.written += len(lines)
            self.stats.sessions.add(session)
        if pending and time.monotonic() - self._manifest_at >= MANIFEST_EVERY_S:
            self._write_manifest()  # after the fsync: it never names more than the files hold
        return failures

    async def _refetch(self, session: str, before_stream_seq: int, wanted_seq: int) -> None:
        """Fill a gap between the ledger file and the stream straight from the stream, up to `wanted_seq`.

        A read can come back short for a moment after a fault (a consumer on a replica that says it is
        current before it has every message): asked again a few times before the events after the gap are
        dead-lettered, which is for a gap the stream really has."""
        attempts = 1 if session in self._open_gaps else _REFETCH_ATTEMPTS  # a real gap waits once only
        for attempt in range(attempts):
            await self._refetch_once(session, before_stream_seq)
            if self._tips.get(session, GENESIS).seq + 1 >= wanted_seq:
                self._open_gaps.discard(session)
                return
            if attempt + 1 < attempts and not self._stop.is_set():
                log.warning(
                    "ledger mirror: session %s still lacks seq %s..%s after reading the stream; again",
                    session,
                    self._tips.get(session, GENESIS).seq + 1,
                    wanted_seq - 1,
                )
                await asyncio.sleep(_REFETCH_WAIT_S * (attempt + 1))
        self._open_gaps.add(session)

    async def _refetch_once(self, session: str, before_stream_seq: int | None) -> None:
        tip = self._tips.get(session, GENESIS)
        batch: list[_Incoming] = []
        async for message in read_stream(
            self._client, self._layout.name, [self._layout.subject_for(session)]
        ):
            if before_stream_seq is not None and message.metadata.sequence.stream >= before_stream_seq:
                break
            item = _decode(message, self._layout)
            if item.event is None or item.event.seq > tip.seq:
                batch.append(item)
        if batch:
            self.stats.refetched += len(batch)
            await self._verify_and_write(batch)

    async def _dead_letter(self, item: _Incoming) -> None:
        event = item.event
        self.stats.dead_lettered += 1
        log.warning(
            "ledger mirror: dead-lettering stream seq %s: %s",
            item.message.metadata.sequence.stream,
            item.malformed or item.error,
        )
        await dead_letter(
            self._client,
            DeadLetter(
                consumer=self._name,
                stream_seq=item.message.metadata.sequence.stream,
                subject=item.message.subject,
                error=item.malformed or item.error or "unknown",
                attempts=item.message.metadata.num_delivered or 1,
                session=event.session if event else None,
                seq=event.seq if event else None,
                data=item.message.data.decode("utf-8", "replace"),
            ),
        )

    async def pending(self) -> int:
        return await self._consumer.pending()


def _decode(message: Msg, layout: StreamLayout) -> _Incoming:
    try:
        event = decode_event(message.data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return _Incoming(message, None, malformed=f"not a valid event: {exc}")
    if encode_event(event) != message.data:
        return _Incoming(message, event, malformed="event is not in canonical form")
    if layout.subject_for(event.session) != message.subject:
        return _Incoming(message, event, malformed=f"published on wrong subject {message.subject}")
    return _Incoming(message, event)


def _restore(tips: dict[str, ChainTip], before: dict[str, ChainTip | None]) -> None:
    for session, tip in before.items():
        if tip is None:
            tips.pop(session, None)
        else:
            tips[session] = tip


def _recover_files(ledger_dir: Path) -> tuple[int, dict[str, ChainTip]]:
    repaired = 0
    tips: dict[str, ChainTip] = {}
    for session in ledger_sessions(ledger_dir):
        path = ledger_path(ledger_dir, session)
        repaired += repair_torn_tail(path)
        tips[session] = read_tip(path)
    return repaired, tips
