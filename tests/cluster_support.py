"""A node on a three-server NATS cluster in its own process, with a handle on each server (issue 23).

`LocalCluster(settings).start()` runs `eventloom up` with `cluster=3` (a `NodeProcess`); each member's pid,
client URL and store dir come from the node's runtime.json (`servers()`, `server(name)`). The node's
supervisor restarts a member that dies on its own store within a second; to keep it down (to wipe or damage
its store first), `kill(name, hold=True)` creates `<data>/nats/<name>/hold`, and `release(name)` lets the
supervisor start it again. `stream_leader` and `wait_replicas_current` read where the stream's replicas are.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

from nats.aio.client import Client

from eventloom.bus.embedded import HOLD_FILE
from eventloom.bus.stream import jetstream_api
from eventloom.errors import EventloomError
from eventloom.runtime import NatsServer, RuntimeInfo, read_runtime
from eventloom.settings import Settings
from gateway.node_process import NodeProcess


def cluster_settings(root: Path, **overrides: Any) -> Settings:
    """A node with three servers and R3, running only the ledger mirror unless told otherwise."""
    chosen: dict[str, Any] = {"cluster": 3, "replicas": 3, "projectors": "none", "producers": "none"}
    return Settings(data_dir=root / "data", **(chosen | overrides))


class LocalCluster:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.node = NodeProcess(settings)
        self.info: RuntimeInfo | None = None

    def start(self, timeout: float = 90.0) -> RuntimeInfo:
        self.info = self.node.start(timeout=timeout)
        return self.info

    def stop(self) -> None:
        self.node.stop()

    def restart(self, timeout: float = 90.0) -> RuntimeInfo:
        """The whole node and its servers stopped and started again on their stores and ports."""
        self.stop()
        return self.start(timeout)

    @property
    def url(self) -> str:
        """Every member's URL, comma-separated (what `connect` takes)."""
        return self.runtime().nats_url

    def runtime(self) -> RuntimeInfo:
        info = read_runtime(self.settings.runtime_file)
        if info is None:
            raise EventloomError(f"no node runs on {self.settings.data_dir}")
        return info

    def servers(self) -> list[NatsServer]:
        return self.runtime().nats_servers

    def server(self, name: str) -> NatsServer:
        for server in self.servers():
            if server.name == name:
                return server
        raise EventloomError(f"no cluster member {name!r}")

    def member_dir(self, name: str) -> Path:
        return self.settings.nats_dir / name

    def kill(self, name: str, *, hold: bool = False, sig: int = signal.SIGKILL) -> int:
        """Signal member `name` (kill -9 by default); with `hold`, the supervisor leaves it down until
        `release`. Returns the pid signalled."""
        server = self.server(name)
        if server.pid is None:
            raise EventloomError(f"{name} has no pid")
        if hold:
            (self.member_dir(name) / HOLD_FILE).touch()
        os.kill(server.pid, sig)
        return server.pid

    def release(self, name: str) -> None:
        (self.member_dir(name) / HOLD_FILE).unlink(missing_ok=True)

    def wait_restarted(self, name: str, old_pid: int, timeout: float = 30.0) -> NatsServer:
        """Until the supervisor has started `name` again (a new pid in runtime.json)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            server = self.server(name)
            if server.pid is not None and server.pid != old_pid:
                return server
            time.sleep(0.05)
        raise EventloomError(f"{name} was not restarted within {timeout:g}s")


async def stream_cluster(client: Client, stream: str) -> dict[str, Any]:
    """STREAM.INFO's `cluster` part: `leader` and `replicas` (each `name`, `current`, `lag`)."""
    info = await jetstream_api(client, f"STREAM.INFO.{stream}")
    if "error" in info:
        raise EventloomError(f"stream {stream}: {info['error']}")
    cluster: dict[str, Any] = info.get("cluster") or {}
    return cluster | {"num_replicas": info["config"]["num_replicas"], "messages": info["state"]["messages"]}


async def stream_leader(client: Client, stream: str, timeout: float = 30.0) -> str:
    return str((await wait_replicas_current(client, stream, timeout, need_all=False))["leader"])


async def wait_replicas_current(
    client: Client, stream: str, timeout: float = 30.0, *, need_all: bool = True
) -> dict[str, Any]:
    """Until the stream has a leader and (with `need_all`) every other replica is current with no lag."""
    deadline = asyncio.get_running_loop().time() + timeout
    cluster: dict[str, Any] = {}
    while asyncio.get_running_loop().time() < deadline:
        try:
            cluster = await stream_cluster(client, stream)
        except (EventloomError, TimeoutError) as exc:  # no leader for a moment
            cluster = {"error": repr(exc)}
        else:
            replicas = cluster.get("replicas") or []
            settled = all(r.get("current") and not r.get("lag") for r in replicas)
            if cluster.get("leader") and (
                not need_all or (settled and len(replicas) + 1 >= cluster["num_replicas"])
            ):
                return cluster
        await asyncio.sleep(0.2)
    raise EventloomError(f"stream {stream}: replicas not current within {timeout:g}s: {cluster}")
