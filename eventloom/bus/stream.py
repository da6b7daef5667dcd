"""The EVENTLOOM stream: subjects, partitions, and idempotent creation or upgrade."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any, Final

import msgspec
import nats.errors
from nats.aio.client import Client

from eventloom.bus.replicas import placed, replicas_error
from eventloom.bus.transient import JETSTREAM_UNAVAILABLE
from eventloom.errors import EventloomError
from eventloom.settings import Settings

SUBJECT_ROOT: Final = "eventloom"
DLQ_STREAM: Final = "EVENTLOOM_DLQ"
DLQ_SUBJECT_ROOT: Final = "eventloom_dlq"
PARTITIONS_METADATA_KEY: Final = "eventloom.partitions"
_MAX_MSG_BYTES: Final = 4 * 1024 * 1024
_NANOS: Final = 1_000_000_000


def partition_of(session: str, partitions: int) -> int:
    return int(hashlib.sha256(session.encode()).hexdigest()[:8], 16) % partitions


class StreamLayout(msgspec.Struct, frozen=True):
    """How sessions map to subjects; `partitions` is fixed when the stream is created."""

    name: str = "EVENTLOOM"
    partitions: int = 16
    atomic_batches: bool = False

    def subject_for(self, session: str) -> str:
        return f"{SUBJECT_ROOT}.{partition_of(session, self.partitions)}.{session}"

    def partition_subjects(self, partitions: list[int] | None = None) -> list[str]:
        chosen = range(self.partitions) if partitions is None else partitions
        return [f"{SUBJECT_ROOT}.{p}.*" for p in chosen]

    @property
    def all_subjects(self) -> str:
        return f"{SUBJECT_ROOT}.*.*"


async def jetstream_api(
    client: Client, verb: str, body: dict[str, Any] | None = None, *, timeout: float = 10.0
) -> dict[str, Any]:
    """One `$JS.API` request with a plain JSON body; raises with the server's own description."""
    payload = msgspec.json.encode(body) if body is not None else b""
    reply = await client.request(f"$JS.API.{verb}", payload, timeout=timeout)
    response: dict[str, Any] = msgspec.json.decode(reply.data)
    return response


_INFO_ATTEMPTS: Final = 8
_INFO_TIMEOUT_S: Final = 2.0


async def stream_info(client: Client, name: str) -> dict[str, Any]:
    """`STREAM.INFO` for `name`, asked again while nobody answers: a replicated stream electing a leader
    (a server just died or restarted) leaves the request unanswered rather than refusing it, or answers
    503 "JetStream system temporarily unavailable"."""
    for attempt in range(_INFO_ATTEMPTS):
        try:
            info = await jetstream_api(client, f"STREAM.INFO.{name}", timeout=_INFO_TIMEOUT_S)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            if attempt == _INFO_ATTEMPTS - 1:
                raise
        else:
            electing = (info.get("error") or {}).get("err_code") == JETSTREAM_UNAVAILABLE
            if not electing or attempt == _INFO_ATTEMPTS - 1:
                return info
        await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def ensure_stream(client: Client, settings: Settings) -> StreamLayout:
    """Create the stream, or upgrade its config in place.

    The partition count of an existing stream wins (it is fixed at creation), and so does a higher
    replica count an operator gave it: an upgrade never scales a clustered stream down.
    """
    name = settings.stream
    info = await stream_info(client, name)
    if "error" in info and info["error"].get("err_code") != 10059:  # 10059: stream not found
        raise EventloomError(f"stream {name}: {info['error'].get('description')}")
    existing = info.get("config") if "error" not in info else None
    partitions, replicas = settings.partitions, settings.replicas
    if existing is not None:
        partitions = int(existing.get("metadata", {}).get(PARTITIONS_METADATA_KEY, partitions))
        replicas = max(replicas, int(existing.get("num_replicas", 1)))
    config = _stream_config(name, partitions, settings.duplicate_window_s, replicas)
    config.update(size_limit(settings.stream_max_bytes, existing))
    if existing is not None and not _differs(existing, config):
        await _ensure_dlq(client, replicas)  # nothing to change: no admin right needed
        return StreamLayout(
            name=name, partitions=partitions, atomic_batches=bool(existing.get("allow_atomic"))
        )
    verb = f"STREAM.UPDATE.{name}" if existing is not None else f"STREAM.CREATE.{name}"
    response = await placed(client, replicas, lambda: _admin_api(client, verb, config))
    if "error" in response and config.pop("allow_atomic", None):
        response = await jetstream_api(client, verb, config)  # servers before 2.12 lack atomic batches
    if "error" in response:
        raise replicas_error(client, f"stream {name}", replicas, response["error"])
    applied = response.get("config", {})
    await _ensure_dlq(client, replicas)
    return StreamLayout(name=name, partitions=partitions, atomic_batches=bool(applied.get("allow_atomic")))


async def describe_stream(client: Client, name: str = "EVENTLOOM") -> StreamLayout:
    """The layout of an existing stream, without creating or changing anything."""
    info = await stream_info(client, name)
    if "error" in info:
        raise EventloomError(f"stream {name}: {info['error'].get('description')} (nothing appended yet?)")
    config = info["config"]
    partitions = int(config.get("metadata", {}).get(PARTITIONS_METADATA_KEY, 16))
    return StreamLayout(name=name, partitions=partitions, atomic_batches=bool(config.get("allow_atomic")))


def size_limit(max_bytes: int | None, existing: dict[str, Any] | None) -> dict[str, Any]:
    """The stream's size limit: `max_bytes` (0: none), or as `existing` has it when None. With a limit the
    server refuses new messages at it (`discard: new`): an event log never makes room by dropping events."""
    if max_bytes is None and existing is not None:
        return {"max_bytes": existing.get("max_bytes", -1), "discard": existing.get("discard", "old")}
    if not max_bytes:
        return {"max_bytes": -1, "discard": "old"}  # no limit is ever reached: nothing is discarded
    return {"max_bytes": max_bytes, "discard": "new"}


def _stream_config(name: str, partitions: int, duplicate_window_s: float, replicas: int) -> dict[str, Any]:
    layout = StreamLayout(name=name, partitions=partitions)
    return {
        "name": name,
        "subjects": layout.partition_subjects(),
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msg_size": _MAX_MSG_BYTES,
        "num_replicas": replicas,
        "duplicate_window": int(duplicate_window_s * _NANOS),
        "deny_delete": True,
        "deny_purge": False,
        "allow_direct": True,
        "allow_atomic": True,
        "metadata": {PARTITIONS_METADATA_KEY: str(partitions)},
    }


async def _ensure_dlq(client: Client, replicas: int) -> None:
    info = await stream_info(client, DLQ_STREAM)
    if "error" not in info:  # like the event stream: never scaled down
        replicas = max(replicas, int(info["config"].get("num_replicas", 1)))
    config = {
        "name": DLQ_STREAM,
        "subjects": [f"{DLQ_SUBJECT_ROOT}.>"],
        "retention": "limits",
        "storage": "file",
        "num_replicas": replicas,
        "max_msg_size": _MAX_MSG_BYTES * 2,
    }
    if "error" not in info and not _differs(info["config"], config):
        return
    verb = "UPDATE" if "error" not in info else "CREATE"
    response = await placed(
        client, replicas, lambda: _admin_api(client, f"STREAM.{verb}.{DLQ_STREAM}", config)
    )
    if "error" in response:
        raise replicas_error(client, f"stream {DLQ_STREAM}", replicas, response["error"])


def _differs(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether applying `wanted` would change the stream (keys the server adds or drops do not count)."""
    for key, value in wanted.items():
        if key == "allow_atomic":
            continue  # servers before 2.12 drop it: not a difference to correct
        if key == "metadata":
            if any(existing.get("metadata", {}).get(k) != v for k, v in value.items()):
                return True
        elif existing.get(key) != value:
            return True
    return False


async def _admin_api(client: Client, verb: str, body: dict[str, Any]) -> dict[str, Any]:
    """A stream change: only the bus's admin may make one, and the server drops anyone else's silently."""
    try:
        return await jetstream_api(client, verb, body)
    except nats.errors.TimeoutError:
        raise EventloomError(
            f"{verb}: no answer; creating or changing a stream needs the admin credential (start the "
            "node that owns the stream first, or connect as admin)"
        ) from None


async def subject_counts(client: Client, stream: str, subject_filter: str) -> dict[str, int]:
    """Messages per subject (paged through the STREAM.INFO subjects filter)."""
    counts: dict[str, int] = {}
    offset = 0
    while True:
        info = await jetstream_api(
            client, f"STREAM.INFO.{stream}", {"subjects_filter": subject_filter, "offset": offset}
        )
        if "error" in info:
            raise EventloomError(f"stream {stream}: {info['error'].get('description')}")
        page: dict[str, int] = info.get("state", {}).get("subjects") or {}
        counts.update(page)
        total = int(info.get("total", 0))
        offset += len(page)
        if not page or offset >= total:
            return counts
