"""Peer status: who is on the bus, and is each one alive.

Every Eventloom process (the node, a projector or producer worker, the query service, an MCP gateway)
publishes a `Heartbeat` every `heartbeat_interval_s` (`eventloom.bus.heartbeat.HeartbeatPublisher`): on the
subject `eventloom_peers.<id>` for the processes that watch live, and into the KV bucket `EVENTLOOM_PEERS`
under its id, so a reader that just started (`eventloom status peers`) sees every peer at once.

A peer is `alive` while its last heartbeat is younger than `peer_suspect_after_s`, `suspect` until
`peer_dead_after_s`, then `dead`. For one id, only a higher `heartbeat_seq` counts: an older heartbeat that
arrives late changes nothing. A restarted process is a new peer (a new id); the bucket forgets an id that
has sent nothing for `PEERS_MAX_AGE_S`.

The subjects have a root of their own: `eventloom.*.*` is the event stream's, and each role's permissions on
it are about events.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

import msgspec
from nats.aio.client import Client

from eventloom.bus.stream import jetstream_api, subject_counts
from eventloom.settings import Settings

log = logging.getLogger(__name__)

PEERS_SUBJECT_ROOT: Final = "eventloom_peers"
PEERS_BUCKET: Final = "EVENTLOOM_PEERS"
PEERS_MAX_AGE_S: Final = 900.0
"""A peer unheard of for this long drops out of the bucket (and out of `eventloom status peers`)."""
PEER_ID_PATTERN: Final = r"^[A-Za-z0-9_-]{1,128}$"  # one subject token, and a valid KV key
_PEERS_STREAM: Final = f"KV_{PEERS_BUCKET}"
_KEY_PREFIX: Final = f"$KV.{PEERS_BUCKET}."
_STREAM_NOT_FOUND: Final = 10059

PeerState = Literal["alive", "suspect", "dead"]


class Heartbeat(msgspec.Struct, frozen=True, kw_only=True):
    """What a process says about itself on the bus, every `heartbeat_interval_s` (the wire format)."""

    id: Annotated[str, msgspec.Meta(pattern=PEER_ID_PATTERN)]
    """Unique per process instance: a restarted process is a new peer."""
    role: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    """node, projector, producer, query, gateway-http or gateway-stdio."""
    heartbeat_seq: Annotated[int, msgspec.Meta(ge=0)]
    """Counts up from 1 per id: the higher one wins."""
    sent_at: str
    """RFC 3339 UTC, by the sender's clock (informative: ages come from the receiver's or the server's)."""
    version: str
    """The package version the process runs."""
    host: str
    pid: int
    capabilities: list[str] = []
    """What it runs: its roles, projectors and producers (e.g. projector:graph, producer:causal)."""
    urls: list[str] = []
    """Where it serves (the HTTP gateway's MCP URL)."""
    lag: dict[str, int] | None = None
    """Events pending (not yet acknowledged) per consumer it reads through; None when it reads none."""


class PeerStatus(msgspec.Struct, frozen=True, kw_only=True):
    heartbeat: Heartbeat
    status: PeerState
    age_s: float
    """Seconds since its last heartbeat was seen."""

    def flat(self) -> dict[str, object]:
        """One flat JSON object: the heartbeat's fields with `status` and `age_s` (what `--json` prints)."""
        fields: dict[str, object] = msgspec.to_builtins(self.heartbeat)
        first = {"id": fields.pop("id"), "role": fields.pop("role")}
        return first | {"status": self.status, "age_s": self.age_s} | fields


def peers_subject(peer_id: str) -> str:
    return f"{PEERS_SUBJECT_ROOT}.{peer_id}"


def decode_heartbeat(data: bytes) -> Heartbeat:
    """Raises `msgspec.DecodeError` (or its `ValidationError`) with what is wrong."""
    return msgspec.json.decode(data, type=Heartbeat)


def peer_state(age_s: float, suspect_after_s: float, dead_after_s: float) -> PeerState:
    if age_s >= dead_after_s:
        return "dead"
    if age_s >= suspect_after_s:
        return "suspect"
    return "alive"


@dataclass
class PeerTable:
    """The last heartbeat seen of each peer, and when it was seen; no clock of its own (every call says
    what time it is, on whichever clock the caller measures `seen_at` with)."""

    suspect_after_s: float
    dead_after_s: float
    _latest: dict[str, tuple[Heartbeat, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, settings: Settings) -> PeerTable:
        return cls(settings.peer_suspect_after_s, settings.peer_dead_after_s)

    def observe(self, heartbeat: Heartbeat, seen_at: float) -> bool:
        """Take `heartbeat` if it is newer than what the table holds for its id (a higher seq)."""
        held = self._latest.get(heartbeat.id)
        if held is not None and heartbeat.heartbeat_seq <= held[0].heartbeat_seq:
            return False  # a duplicate, or an older one that arrived late
        self._latest[heartbeat.id] = (heartbeat, seen_at)
        return True

    def status(self, peer_id: str, now: float) -> PeerStatus | None:
        held = self._latest.get(peer_id)
        if held is None:
            return None
        heartbeat, seen_at = held
        age = max(0.0, now - seen_at)
        state = peer_state(age, self.suspect_after_s, self.dead_after_s)
        return PeerStatus(heartbeat=heartbeat, status=state, age_s=round(age, 3))

    def statuses(self, now: float) -> list[PeerStatus]:
        """Every peer, by role then id."""
        found = (self.status(peer_id, now) for peer_id in sorted(self._latest))
        return sorted((s for s in found if s is not None), key=lambda s: (s.heartbeat.role, s.heartbeat.id))

    def forget(self, now: float, after_s: float) -> list[str]:
        """Drop the peers unheard of for `after_s` or more; their ids."""
        gone = [peer_id for peer_id, (_, seen_at) in self._latest.items() if now - seen_at >= after_s]
        for peer_id in gone:
            del self._latest[peer_id]
        return gone

    def __len__(self) -> int:
        return len(self._latest)


async def read_peers(client: Client, settings: Settings) -> list[PeerStatus]:
    """Every peer in the `EVENTLOOM_PEERS` bucket with its status, by role then id (none if no process has
    ever published a heartbeat).

    A peer's age is measured from when the NATS server stored its last heartbeat to this host's clock now:
    the reader's and the server's clocks must agree (NTP), never the senders'. A bad entry is left out.
    (The keys are listed from the stream's subjects and read by direct requests: nats-py's KV watcher may
    say it has listed everything before it has.)"""
    info = await jetstream_api(client, f"STREAM.INFO.{_PEERS_STREAM}")
    if info.get("error", {}).get("err_code") == _STREAM_NOT_FOUND:
        return []
    keys = [
        subject.removeprefix(_KEY_PREFIX)
        for subject in await subject_counts(client, _PEERS_STREAM, f"{_KEY_PREFIX}>")
    ]
    stored = await asyncio.gather(*(_last_of(client, key) for key in keys))
    table = PeerTable.of(settings)
    for key, message in zip(keys, stored, strict=True):
        if message is None:
            continue
        heartbeat = _entry_heartbeat(key, base64.b64decode(message.get("data") or ""))
        if heartbeat is not None:
            table.observe(heartbeat, _epoch_s(message["time"]))
    return table.statuses(time.time())


async def _last_of(client: Client, key: str) -> dict[str, Any] | None:
    """The bucket's last message for `key`; None when there is none or it removed the key."""
    answer = await jetstream_api(
        client, f"STREAM.MSG.GET.{_PEERS_STREAM}", {"last_by_subj": _KEY_PREFIX + key}
    )
    message: dict[str, Any] | None = answer.get("message")
    if message is None or "time" not in message:
        return None
    headers = base64.b64decode(message.get("hdrs") or "")
    if b"KV-Operation" in headers or b"Nats-Marker-Reason" in headers:  # a delete or purge marker
        return None
    return message


def _entry_heartbeat(key: str, value: bytes | None) -> Heartbeat | None:
    try:
        heartbeat = decode_heartbeat(value or b"")
    except msgspec.DecodeError as exc:
        log.warning("peers bucket: entry %r is not a heartbeat (%s); left out", key, exc)
        return None
    if heartbeat.id != key:
        log.warning("peers bucket: entry %r holds the heartbeat of %r; left out", key, heartbeat.id)
        return None
    return heartbeat


def _epoch_s(stored: str) -> float:
    """A NATS stored time ("2026-11-25T15:40:00.123456789Z", UTC, nanoseconds) as seconds since the epoch."""
    whole, _, fraction = stored.removesuffix("Z").partition(".")
    moment = datetime.fromisoformat(whole).replace(tzinfo=UTC)
    return moment.timestamp() + float(f"0.{fraction or '0'}")
