"""`<data>/runtime.json`: how a running node is found by every other command."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import Literal

import msgspec

from eventloom.errors import EventloomError, NodeNotRunningError
from eventloom.keys import replace_atomically
from eventloom.settings import Settings

LOCK_NAME = "node.lock"


class RoleState(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """How one role of a running process fares. A role that failed is `failing` (with its last error) until
    it has run a while again without failing."""

    state: Literal["running", "failing"] = "running"
    restarts: int = 0
    last_error: str | None = None
    failed_at: str | None = None
    retry_in_s: float | None = None  # while failing: the backoff before the next restart


class NatsServer(msgspec.Struct, frozen=True, kw_only=True):
    """One nats-server the node started: its pid (while it runs), client URL and JetStream store."""

    name: str
    pid: int | None
    url: str
    store_dir: str
    cluster_port: int | None = None  # a cluster member's route port


class RuntimeInfo(msgspec.Struct, frozen=True, kw_only=True):
    pid: int
    nats_url: str  # with a cluster: every member's URL, comma-separated
    embedded: bool
    nats_pid: int | None = None
    nats_servers: list[NatsServer] = msgspec.field(default_factory=list)  # every server the node started
    data_dir: str
    started_at: str
    roles: list[str] = msgspec.field(default_factory=list)
    http_url: str | None = None
    role_states: dict[str, RoleState] = msgspec.field(default_factory=dict)
    producers: list[str] = msgspec.field(default_factory=list)  # the producers its `producers` role runs

    def failing(self) -> dict[str, RoleState]:
        return {name: s for name, s in self.role_states.items() if s.state == "failing"}


def write_runtime(path: Path, info: RuntimeInfo) -> None:
    body = msgspec.json.format(msgspec.json.encode(info), indent=2) + b"\n"
    replace_atomically(path, lambda tmp: tmp.write_bytes(body))


def read_runtime(path: Path) -> RuntimeInfo | None:
    """The running node's info, or None when there is no file or no live node holds the data dir's lock."""
    try:
        info = msgspec.json.decode(path.read_bytes(), type=RuntimeInfo)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    return info if node_lock_held(path.with_name(LOCK_NAME)) else None


class NodeLock:
    """A running node holds `<data>/node.lock` (flock) for its whole life. The kernel drops it the instant
    the process dies, however it dies, so liveness never hangs on a pid that lingers as an unreaped zombie
    after kill -9, or that another process was given since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, patience_s: float = 0.5) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + patience_s  # a probe's brief shared lock is not a node
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise EventloomError(
                        f"a node is already running for {self.path.parent} (it holds {self.path})"
                    ) from None
                time.sleep(0.02)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the lock
            self._fd = None


def node_lock_held(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


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
