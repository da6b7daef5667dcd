"""`<data>/runtime.json`: how a running node is found by every other command."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from eventloom.bus.embedded import pid_alive
from eventloom.errors import NodeNotRunningError
from eventloom.settings import Settings


class RuntimeInfo(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    nats_url: str
    embedded: bool
    nats_pid: int | None = None
    data_dir: str
    started_at: str
    roles: list[str] = msgspec.field(default_factory=list)
    http_url: str | None = None


def write_runtime(path: Path, info: RuntimeInfo) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(info), indent=2) + b"\n")
    os.replace(tmp, path)


def read_runtime(path: Path) -> RuntimeInfo | None:
    """The running node's info, or None when there is no file or its process is gone."""
    try:
        info = msgspec.json.decode(path.read_bytes(), type=RuntimeInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return info if pid_alive(info.pid) else None


def resolve_nats_url(settings: Settings) -> str:
    """`EVENTLOOM_NATS_URL`, else the URL of the node running on this data dir."""
    if settings.nats_url:
        return settings.nats_url
    info = read_runtime(settings.runtime_file)
    if info is None:
        raise NodeNotRunningError(
            f"no Eventloom node is running for data dir {settings.data_dir}. "
            "Start one with `eventloom up --detach` (same --data-dir), or set EVENTLOOM_NATS_URL."
        )
    return info.nats_url
