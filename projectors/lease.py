"""`ConsumerLease`: one worker of a durable consumer applies, the others stand by.

See docs/operations.md#projector-failover.

Two workers pulling from one consumer of an in-order projector trade a session's events back and forth and
stall, so every worker of a projector consumer first takes the consumer's lease: a key (the consumer's
name) in the KV bucket `EVENTLOOM_LEASES` whose value names the holder. Whoever creates the key holds it,
and renews it every third of `lease_s` by a compare-and-swap on its revision. A standby takes the lease
over when the holder's entry has not changed for `lease_s` by the standby's own clock, counted from when
it first saw that revision (no clock is compared across hosts), again by a compare-and-swap: of several
standbys exactly one wins. A holder whose renewal is refused was taken over: it is fenced, applies nothing
more, and stands by. `held` is false once `lease_s` has passed since the holder last sent a renewal that
succeeded; the standby's count starts later than that (after the server stored the renewal), so by the
time a standby may take over, the holder already counts itself out.

A holder that stops cleanly deletes the key, and a standby takes over at its next look. A worker that
finds the key held by a process of its own host that no longer exists (a crash, then a restart) takes it
at once instead of waiting `lease_s`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
import time
import weakref
from collections.abc import Callable
from typing import Final, Literal

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.stream import jetstream_api, subject_counts
from eventloom.event import utc_timestamp

log = logging.getLogger(__name__)

LEASE_BUCKET: Final = "EVENTLOOM_LEASES"
LeaseRole = Literal["active", "standby"]
_NATS_TROUBLE = (nats.errors.Error, nats.js.errors.Error, TimeoutError)
_CLOCK_ID = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)
_HERE: weakref.WeakValueDictionary[str, ConsumerLease] = weakref.WeakValueDictionary()
"""The leases of this process, by holder id: a holder with this pid but none of these ids is a previous
incarnation (a container restarts its process under the same pid)."""


def lease_clock() -> float:
    """Seconds on a clock that never jumps and, where the OS has one (Linux), goes on while the host
    sleeps: a holder suspended with its host must count that time as gone."""
    return time.clock_gettime(_CLOCK_ID)


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True):
    """The lease's value: who holds it (informative beyond `holder`, which identifies the process)."""

    holder: str
    """`host:pid:random`, unique per process instance."""
    role: str
    acquired_at: str
    """RFC 3339 UTC by the holder's clock: for people, never for deciding."""


def new_holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def dead_here(holder: str) -> bool:
    """True when `holder` names a process of this host that no longer runs (an earlier incarnation with
    this very pid, in a container, counts as gone)."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return holder not in _HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's process with that pid: alive
    return False


class Fenced(Exception):
    """This worker lost its consumer's lease: it must not write or acknowledge anything more."""


class ConsumerLease:
    """The lease of durable consumer `consumer`: `acquire` (standing by until it is ours), `keep` renewing
    it, `held` before every write, `release` on a clean stop."""

    def __init__(
        self,
        client: Client,
        consumer: str,
        lease_s: float,
        *,
        role: str = "projector",
        replicas: int = 1,
        clock: Callable[[], float] = lease_clock,
    ) -> None:
        if not lease_s > 0:
            raise ValueError(f"lease_s: must be more than 0 seconds, got {lease_s!r}")
        self.consumer = consumer
        self.lease_s = lease_s
        self.holder_id = new_holder_id()
        _HERE[self.holder_id] = self
        self.took_over = False
        """The last `acquire` replaced a holder that had not let go (its messages may be unacknowledged)."""
        self.current: LeaseRecord | None = None
        """The holder last seen (this worker's own record while it holds the lease)."""
        self.on_role: Callable[[LeaseRole], None] | None = None
        self._client = client
        self._role = role
        self._replicas = replicas
        self._clock = clock
        self._kv: KeyValue | None = None
        self._revision: int | None = None
        self._renewed_at = 0.0
        self.lost = asyncio.Event()
        """Set when the lease is lost (taken over, or not renewed for `lease_s`)."""

    @property
    def role(self) -> LeaseRole:
        return "active" if self.held else "standby"

    @property
    def held(self) -> bool:
        """Ours, and renewed less than `lease_s` ago: a standby cannot have taken it yet."""
        return self._revision is not None and self._clock() - self._renewed_at < self.lease_s

    @property
    def poll_s(self) -> float:
        """How often a standby looks at the lease: a tenth of it, between 50 ms and 1 s."""
        return min(1.0, max(0.05, self.lease_s / 10))

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Stand by until the lease is ours (True), or until `stop` is set (False)."""
        seen: tuple[int, float] | None = None  # the holder's revision, and when this worker first saw it
        waiting_logged = False
        while not stop.is_set():
            try:
                seen = await self._try_acquire(seen)
            except _NATS_TROUBLE as exc:
                log.warning("%s: cannot reach the lease (%r); standing by", self.consumer, exc)
                seen = None  # a revision seen before the trouble may have been renewed meanwhile
            if self._revision is not None:
                how = "took over" if self.took_over else "free"
                log.info("%s: active as %s (%s)", self.consumer, self.holder_id, how)
                self._announce("active")
                return True
            if not waiting_logged and self.current is not None:
                log.info("%s: standing by, held by %s", self.consumer, self.current.holder)
                self._announce("standby")
                waiting_logged = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.poll_s)
        return False

    async def _try_acquire(self, seen: tuple[int, float] | None) -> tuple[int, float] | None:
        """One look: take the lease if it is free, stale or ours (sets `_revision`); else what was seen."""
        kv = await self._bucket()
        try:
            entry = await kv.get(self.consumer)
        except nats.js.errors.KeyNotFoundError:  # never held, or released (deleted)
            entry = None
        if entry is None or not entry.value:
            with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):  # another standby was first
                self._won(await kv.create(self.consumer, self._value()), took_over=False)
            return None
        revision = int(entry.revision or 0)
        self.current = msgspec.json.decode(entry.value, type=LeaseRecord)
        now = self._clock()
        if seen is None or seen[0] != revision:
            seen = (revision, now)
        ours = self.current.holder == self.holder_id  # a renewal of ours that timed out, yet was stored
        if ours or dead_here(self.current.holder) or now - seen[1] >= self.lease_s:
            try:
                self._won(await kv.update(self.consumer, self._value(), last=revision), took_over=True)
            except nats.js.errors.KeyWrongLastSequenceError:
                return None  # renewed meanwhile, or another standby won
        return seen

    async def keep(self) -> None:
        """Renew every third of `lease_s` until the lease is lost (then return) or this is cancelled."""
        while self._revision is not None:
            await asyncio.sleep(self.lease_s / 3)
            if not await self.confirm():
                return

    async def confirm(self) -> bool:
        """Renew now: True while the lease is ours. False, and fenced for good (until `acquire`), once
        another worker took it, or once it could not be renewed for `lease_s`."""
        if self._revision is None:
            return False
        sent = self._clock()
        try:
            kv = await self._bucket()
            async with asyncio.timeout(max(self.lease_s / 3, 0.2)):
                revision = await kv.update(self.consumer, self._value(), last=self._revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            self._lose("another worker took the lease over")
            return False
        except _NATS_TROUBLE as exc:
            if self.held:
                log.warning("%s: could not renew the lease (%r); trying again", self.consumer, exc)
                return True
            self._lose(f"not renewed for {self.lease_s:g}s ({exc!r})")
            return False
        self._revision, self._renewed_at = revision, sent
        return True

    async def still_held(self) -> bool:
        """Before a write: held by the clock, or, past it, confirmed by a renewal (a holder whose event
        loop was busy beyond `lease_s` keeps the lease if nobody took it)."""
        return self.held or await self.confirm()

    async def release(self) -> None:
        """Let go (a clean stop): a standby takes over at its next look instead of after `lease_s`."""
        revision, self._revision = self._revision, None
        if revision is None:
            return
        with contextlib.suppress(*_NATS_TROUBLE):
            kv = await self._bucket()
            async with asyncio.timeout(2.0):
                await kv.delete(self.consumer, last=revision)
        self._announce("standby")

    def _won(self, revision: int, *, took_over: bool) -> None:
        self._revision, self._renewed_at = revision, self._clock()
        self.took_over = took_over
        self.current = LeaseRecord(holder=self.holder_id, role=self._role, acquired_at=utc_timestamp())
        self.lost.clear()

    def _lose(self, why: str) -> None:
        log.warning("%s: fenced: %s; standing by", self.consumer, why)
        self._revision = None
        self.lost.set()
        self._announce("standby")

    def _value(self) -> bytes:
        mine = self.current is not None and self.current.holder == self.holder_id
        acquired = self.current.acquired_at if mine and self.current else None
        record = LeaseRecord(holder=self.holder_id, role=self._role, acquired_at=acquired or utc_timestamp())
        return msgspec.json.encode(record)

    def _announce(self, role: LeaseRole) -> None:
        if self.on_role is not None:
            self.on_role(role)

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            self._kv = await ensure_bucket(self._client, LEASE_BUCKET, replicas=self._replicas)
        return self._kv


async def lease_holders(client: Client) -> dict[str, LeaseRecord]:
    """Every consumer's current lease holder (none when no worker took a lease yet)."""
    info = await jetstream_api(client, f"STREAM.INFO.KV_{LEASE_BUCKET}")
    if "error" in info:
        return {}
    prefix = f"$KV.{LEASE_BUCKET}."
    subjects = await subject_counts(client, f"KV_{LEASE_BUCKET}", f"{prefix}>")
    kv = await ensure_bucket(client, LEASE_BUCKET)
    holders: dict[str, LeaseRecord] = {}
    for subject in sorted(subjects):
        key = subject.removeprefix(prefix)
        with contextlib.suppress(nats.js.errors.KeyNotFoundError, msgspec.DecodeError):  # released
            entry = await kv.get(key)
            if entry.value:
                holders[key] = msgspec.json.decode(entry.value, type=LeaseRecord)
    return holders
