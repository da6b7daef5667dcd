"""What `eventloom projector status` shows: lag (events and seconds), rate and dead letters per consumer."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime
from typing import Any, Final

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.stream import StreamLayout, jetstream_api
from eventloom.dlq import dead_letter_counts
from eventloom.event import utc_timestamp
from projectors.lease import lease_holders

STATS_BUCKET: Final = "EVENTLOOM_CONSUMER_STATS"
STATS_TTL_S: Final = 3600
_ROLES: Final = ("projector-", "producer-", "rebuild-", "ledger-mirror")


class RunnerReport(msgspec.Struct, frozen=True, kw_only=True):
    """Published by a running worker every few seconds."""

    consumer: str
    applied: int
    rate_per_s: float
    dead_lettered: int
    updated_at: str
    refused: int = 0  # events that failed verification (hash, signature, link), also dead-lettered


class ConsumerStatus(msgspec.Struct, frozen=True, kw_only=True):
    consumer: str
    lag: int
    """Events on its subjects not yet acknowledged."""
    ack_pending: int
    delivered_stream_seq: int
    dead_letters: int
    rate_per_s: float | None = None
    applied: int | None = None
    refused: int | None = None
    updated_at: str | None = None
    state: str | None = None  # of the node role reading through it: running | failing
    last_error: str | None = None  # while failing
    lag_s: float | None = None
    """Age of the oldest event it has not acknowledged yet (0 when it has caught up)."""
    holder: str | None = None
    """The worker holding its lease (`host:pid:random`): the one that applies; others stand by."""


class StatsPublisher:
    """Keeps a worker's `RunnerReport` fresh in the stats bucket (best effort: status is advisory)."""

    def __init__(self, client: Client, consumer: str, interval_s: float = 2.0) -> None:
        self._client = client
        self._consumer = consumer
        self._interval = interval_s
        self._last: tuple[float, int] | None = None
        self._troubles = (0, 0)

    async def publish(self, applied: int, dead_lettered: int, refused: int = 0) -> None:
        now = time.monotonic()
        troubles = (dead_lettered, refused)
        if self._last is not None and now - self._last[0] < self._interval and troubles == self._troubles:
            return  # a dead letter or a refusal is reported at once, progress every few seconds
        self._troubles = troubles
        rate = 0.0 if self._last is None else (applied - self._last[1]) / max(now - self._last[0], 1e-6)
        self._last = (now, applied)
        report = RunnerReport(
            consumer=self._consumer,
            applied=applied,
            rate_per_s=round(rate, 1),
            dead_lettered=dead_lettered,
            updated_at=utc_timestamp(),
            refused=refused,
        )
        with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, asyncio.TimeoutError):
            bucket = await _bucket(self._client)
            await bucket.put(self._consumer, msgspec.json.encode(report))


async def _bucket(client: Client) -> KeyValue:
    return await ensure_bucket(client, STATS_BUCKET, ttl=STATS_TTL_S)  # the node created it


async def forget_consumer(client: Client, consumer: str) -> None:
    """Drop a removed consumer's last report, so status does not show it any more."""
    with contextlib.suppress(nats.js.errors.KeyNotFoundError, nats.js.errors.NotFoundError):
        await (await _bucket(client)).purge(consumer)


async def consumer_statuses(client: Client, layout: StreamLayout) -> list[ConsumerStatus]:
    listing = await jetstream_api(client, f"CONSUMER.LIST.{layout.name}")
    letters = await dead_letter_counts(client)
    bucket = await _bucket(client)
    holders = await lease_holders(client)
    statuses = []
    for info in listing.get("consumers") or []:
        name = info["name"]
        if not name.startswith(_ROLES):
            continue
        report: RunnerReport | None = None
        with contextlib.suppress(nats.js.errors.KeyNotFoundError):
            entry = await bucket.get(name)
            if entry.value:
                report = msgspec.json.decode(entry.value, type=RunnerReport)
        statuses.append(
            ConsumerStatus(
                consumer=name,
                lag=int(info.get("num_pending", 0)) + int(info.get("num_ack_pending", 0)),
                ack_pending=int(info.get("num_ack_pending", 0)),
                delivered_stream_seq=int(info.get("delivered", {}).get("stream_seq", 0)),
                dead_letters=letters.get(name, 0),
                rate_per_s=report.rate_per_s if report else None,
                applied=report.applied if report else None,
                refused=report.refused if report else None,
                updated_at=report.updated_at if report else None,
                lag_s=await lag_seconds(client, layout.name, info),
                holder=holders[name].holder if name in holders else None,
            )
        )
    return sorted(statuses, key=lambda s: s.consumer)


async def lag_seconds(client: Client, stream: str, info: dict[str, Any]) -> float | None:
    """How long the oldest event a consumer has not acknowledged has been in the stream (from its
    `CONSUMER.INFO`); 0.0 when it has caught up, None when that event cannot be read."""
    if not int(info.get("num_pending", 0)) + int(info.get("num_ack_pending", 0)):
        return 0.0
    config = info.get("config", {})
    subjects = config.get("filter_subjects") or [config.get("filter_subject") or ""]
    request: dict[str, object] = {"seq": int(info.get("ack_floor", {}).get("stream_seq", 0)) + 1}
    if len(subjects) == 1 and subjects[0]:
        request["next_by_subj"] = subjects[0]
    with contextlib.suppress(nats.errors.Error, asyncio.TimeoutError):
        stored = (await jetstream_api(client, f"STREAM.MSG.GET.{stream}", request)).get("message") or {}
        if "time" in stored:
            return round(max(0.0, (datetime.now(UTC) - _rfc3339(stored["time"])).total_seconds()), 3)
    return None


def _rfc3339(text: str) -> datetime:
    """A NATS stored time ("2026-11-25T15:40:00.123456789Z", UTC, nanoseconds) to microseconds."""
    whole, _, fraction = text.removesuffix("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{(fraction or '0')[:6]:0<6}").replace(tzinfo=UTC)
