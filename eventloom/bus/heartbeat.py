"""Sending heartbeats (`HeartbeatPublisher`) and keeping a live table of the peers' (`PeerWatcher`).

Both are best effort and never take their process down: a heartbeat that cannot be sent is logged and sent
again at the next tick; a message that is not a heartbeat is logged and ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Final

import msgspec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.peers import (
    PEERS_BUCKET,
    PEERS_MAX_AGE_S,
    PEERS_SUBJECT_ROOT,
    Heartbeat,
    PeerState,
    PeerStatus,
    PeerTable,
    decode_heartbeat,
    peers_subject,
    read_peers,
)
from eventloom.bus.stream import jetstream_api
from eventloom.event import utc_timestamp
from eventloom.settings import Settings

log = logging.getLogger(__name__)

LagSource = Callable[[], Awaitable[dict[str, int]]]
LAG_EVERY_S: Final = 5.0
"""How often a publisher asks its consumers' lag (a `CONSUMER.INFO` each): status is advisory."""
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_-]+")


def package_version() -> str:
    try:
        return version("eventloom-memory")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0"


def new_peer_id(role: str) -> str:
    """`<role>-<host>-<pid>-<random>`: readable, and unique per process instance."""
    host = _NOT_IN_ID.sub("-", socket.gethostname())[:40].strip("-") or "host"
    return f"{_NOT_IN_ID.sub('-', role)[:32]}-{host}-{os.getpid()}-{secrets.token_hex(3)}"


async def consumer_lags(client: Client, stream: str, consumers: Iterable[str]) -> dict[str, int]:
    """Events pending (delivered or not, unacknowledged) per consumer; one that does not exist is left out."""
    lags: dict[str, int] = {}
    for consumer in consumers:
        info = await jetstream_api(client, f"CONSUMER.INFO.{stream}.{consumer}")
        if "error" not in info:
            lags[consumer] = int(info.get("num_pending", 0)) + int(info.get("num_ack_pending", 0))
    return lags


class HeartbeatPublisher:
    """Publishes this process's heartbeat every `heartbeat_interval_s` while `running()`.

    `capabilities` and `urls` may change while it runs (the node learns its HTTP URL once it listens). The
    lag is that of `consumers` (on the settings' stream), or what `lag` says, asked every `LAG_EVERY_S`, and
    at every tick while one of `consumers` does not exist yet (its runner is starting)."""

    def __init__(
        self,
        client: Client,
        settings: Settings,
        *,
        role: str,
        capabilities: Sequence[str] = (),
        urls: Sequence[str] = (),
        consumers: Sequence[str] = (),
        lag: LagSource | None = None,
        peer_id: str | None = None,
    ) -> None:
        if lag is None and consumers:
            stream, names = settings.stream, list(consumers)

            async def lag() -> dict[str, int]:
                return await consumer_lags(client, stream, names)

        self.id = peer_id or new_peer_id(role)
        self.role = role
        self.capabilities = list(capabilities)
        self.urls = list(urls)
        self.sent = 0
        self._client = client
        self._interval_s = settings.heartbeat_interval_s
        self._lag_source = lag
        self._consumers = set(consumers)
        self._lag: dict[str, int] | None = {} if lag is not None else None
        self._lag_asked_at: float | None = None
        self._bucket: KeyValue | None = None
        self._replicas = settings.replicas
        self._failing = False
        self._version = package_version()
        self._host = socket.gethostname()

    def next_heartbeat(self) -> Heartbeat:
        self.sent += 1
        return Heartbeat(
            id=self.id,
            role=self.role,
            heartbeat_seq=self.sent,
            sent_at=utc_timestamp(),
            version=self._version,
            host=self._host,
            pid=os.getpid(),
            capabilities=list(self.capabilities),
            urls=list(self.urls),
            lag=dict(self._lag) if self._lag is not None else None,
        )

    async def publish_once(self) -> bool:
        """Send one heartbeat (subject and bucket); False, logged, when it could not be sent."""
        data = msgspec.json.encode(self.next_heartbeat())
        try:
            async with asyncio.timeout(max(self._interval_s, 1.0)):
                await self._client.publish(peers_subject(self.id), data)
                bucket = self._bucket or await self._open_bucket()
                await bucket.put(self.id, data)
        except Exception as exc:  # never let status take the process down; try again next tick
            if not self._failing:
                log.warning("could not publish the heartbeat of %s (retrying every tick): %r", self.id, exc)
            self._failing = True
            return False
        if self._failing:
            log.info("the heartbeat of %s is published again", self.id)
        self._failing = False
        return True

    async def _open_bucket(self) -> KeyValue:
        self._bucket = await ensure_bucket(
            self._client, PEERS_BUCKET, replicas=self._replicas, ttl=PEERS_MAX_AGE_S
        )
        return self._bucket

    async def _refresh_lag(self) -> None:
        now = time.monotonic()
        if self._lag_source is None or (
            self._lag_asked_at is not None and now - self._lag_asked_at < LAG_EVERY_S
        ):
            return
        try:
            async with asyncio.timeout(max(self._interval_s, 1.0)):
                self._lag = await self._lag_source()
        except Exception as exc:  # keep the last known lag
            log.debug("could not read the lag of %s: %r", self.id, exc)
        if self._lag is not None and self._consumers <= set(self._lag):
            self._lag_asked_at = now

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._refresh_lag()
            await self.publish_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._interval_s)

    async def forget(self) -> None:
        """Take this peer out of the bucket (a clean stop: nobody should wait for it to turn dead)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                bucket = self._bucket or await self._open_bucket()
                await bucket.purge(self.id)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[HeartbeatPublisher]:
        """Heartbeats while the block runs; on leaving it, this peer leaves the bucket."""
        stop = asyncio.Event()
        task = asyncio.create_task(self.run(stop), name=f"heartbeat {self.id}")
        try:
            yield self
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=max(self._interval_s, 1.0) + 1)
            await self.forget()


class PeerWatcher:
    """This process's own live table of its peers, from their heartbeats on the bus; logs when a peer turns
    suspect or dead, and when it comes back. Ages are measured on this process's monotonic clock."""

    def __init__(
        self,
        client: Client,
        settings: Settings,
        *,
        own_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = PeerTable.of(settings)
        self._client = client
        self._settings = settings
        self._own_id = own_id
        self._clock = clock
        self._states: dict[str, PeerState] = {}
        self.ignored = 0

    def receive(self, data: bytes) -> bool:
        """Take one message from the peers subject; False (logged) when it is not a newer heartbeat."""
        try:
            heartbeat = decode_heartbeat(data)
        except msgspec.DecodeError as exc:
            self.ignored += 1
            log.warning("ignored a message on %s.* that is not a heartbeat: %s", PEERS_SUBJECT_ROOT, exc)
            return False
        return heartbeat.id != self._own_id and self.table.observe(heartbeat, self._clock())

    def check(self) -> list[tuple[PeerStatus, PeerState | None]]:
        """Each peer whose status changed since the last check, with its previous status; logged."""
        changed: list[tuple[PeerStatus, PeerState | None]] = []
        for peer in self.table.statuses(self._clock()):
            before = self._states.get(peer.heartbeat.id)
            if before == peer.status:
                continue
            self._states[peer.heartbeat.id] = peer.status
            changed.append((peer, before))
            described = f"peer {peer.heartbeat.id} ({peer.heartbeat.role} on {peer.heartbeat.host})"
            if peer.status != "alive":
                log.warning("%s is %s: no heartbeat for %.1fs", described, peer.status, peer.age_s)
            elif before is not None:
                log.info("%s is alive again", described)
        for gone in self.table.forget(self._clock(), PEERS_MAX_AGE_S):
            self._states.pop(gone, None)
        return changed

    def peers(self) -> list[PeerStatus]:
        return self.table.statuses(self._clock())

    async def run(self, stop: asyncio.Event) -> None:
        async def received(msg: Msg) -> None:
            self.receive(msg.data)

        subscription = await self._client.subscribe(f"{PEERS_SUBJECT_ROOT}.*", cb=received)
        try:
            await self._seed()
            while not stop.is_set():
                self.check()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=self._settings.heartbeat_interval_s)
        finally:
            with contextlib.suppress(Exception):
                await subscription.unsubscribe()

    async def _seed(self) -> None:
        """Start from the bucket, so peers that are already dead are known as such at once."""
        try:
            known = await read_peers(self._client, self._settings)
        except Exception as exc:
            log.debug("could not read the peers bucket: %r", exc)
            return
        now = self._clock()
        for peer in known:
            if peer.heartbeat.id != self._own_id:
                self.table.observe(peer.heartbeat, now - peer.age_s)
                self._states[peer.heartbeat.id] = peer.status  # known already: no news to log

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[PeerWatcher]:
        stop = asyncio.Event()
        task = asyncio.create_task(self._run_logged(stop), name="peer watcher")
        try:
            yield self
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=5)

    async def _run_logged(self, stop: asyncio.Event) -> None:
        try:
            await self.run(stop)
        except Exception:  # watching is advisory: the process goes on without it
            log.exception("the peer watcher stopped")
