"""A NATS cluster on loopback for development and tests: `eventloom up --cluster 3`.

Each member is an `EmbeddedNats` (supervised, restarted on its own store) under `<data>/nats/<name>/`, with
its client and route ports remembered there, routed to the others with a shared route secret
(`<data>/nats/route-secret`, 0600), JetStream on each, and the same `authorization` block as a single
embedded server. Clients are given every member's URL as one comma-separated list.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec
import nats.errors
from nats.aio.client import Client

from eventloom.bus.embedded import ClusterBlock, EmbeddedNats, free_port, read_int
from eventloom.bus.replicas import server_count
from eventloom.errors import EventloomError
from eventloom.keys import atomic_write
from eventloom.runtime import NatsServer
from eventloom.settings import CLUSTER_SIZES, DEFAULT_NATS_MEMORY_LIMIT_MB, Settings

ROUTE_SECRET_FILE: Final = "route-secret"  # noqa: S105 (a file name)
_META_LEADER_TIMEOUT_S: Final = 60.0


def member_names(size: int) -> list[str]:
    return [f"nats-{i}" for i in range(1, size + 1)]


def ensure_route_secret(nats_dir: Path) -> str:
    """The cluster's route password, generated (0600) on first use and kept."""
    path = nats_dir / ROUTE_SECRET_FILE
    with contextlib.suppress(FileNotFoundError):
        secret = path.read_text().strip()
        if secret:
            return secret
    nats_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    secret = secrets.token_urlsafe(32)
    atomic_write(path, secret.encode() + b"\n", mode=0o600)
    return secret


def _reserve_ports(nats_dir: Path, names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """Each member's (client, route) port: the remembered ones while free, else new ones, all distinct."""
    taken: set[int] = set()
    ports: dict[str, tuple[int, int]] = {}
    for name in names:
        chosen = []
        for file in ("port", "cluster_port"):
            remembered = read_int(nats_dir / name / file)
            port = free_port(remembered if remembered not in taken else None)
            while port in taken:
                port = free_port()
            taken.add(port)
            chosen.append(port)
            (nats_dir / name).mkdir(parents=True, exist_ok=True, mode=0o700)
            (nats_dir / name / file).write_text(f"{port}\n")
        ports[name] = (chosen[0], chosen[1])
    return ports


class NatsCluster:
    """`size` supervised nats-server processes on loopback, routed into one JetStream cluster.

    `supervise=False` leaves a dead member dead (tests that kill and restart members themselves use
    `restart`); with supervision, a `<member dir>/hold` file keeps a dead member down until it is removed.
    """

    def __init__(
        self,
        nats_dir: Path,
        size: int = 3,
        sync: str = "default",
        *,
        authorization: str = "",
        supervise: bool = True,
        memory_limit_mb: int = DEFAULT_NATS_MEMORY_LIMIT_MB,
    ) -> None:
        if size not in CLUSTER_SIZES or size == 1:  # one server is `EmbeddedNats` alone
            raise EventloomError(f"cluster: must be 3 or 5 servers, got {size}")
        self.nats_dir = nats_dir
        self.size = size
        self.sync = sync
        self.authorization = authorization
        self.supervise = supervise
        self.memory_limit_mb = memory_limit_mb
        self.servers: list[EmbeddedNats] = []
        self.on_restart: Callable[[], Awaitable[None]] | None = None

    @property
    def url(self) -> str:
        """Every member's client URL, comma-separated (what `connect` and runtime.json take)."""
        return ",".join(server.url for server in self.servers)

    @property
    def pid(self) -> int | None:
        return self.servers[0].pid if self.servers else None

    async def start(self) -> str:
        secret = await asyncio.to_thread(ensure_route_secret, self.nats_dir)
        names = member_names(self.size)
        ports = await asyncio.to_thread(_reserve_ports, self.nats_dir, names)
        self.servers = [
            EmbeddedNats(
                self.nats_dir / name,
                self.sync,
                supervise=self.supervise,
                authorization=self.authorization,
                server_name=name,
                port=ports[name][0],
                memory_limit_mb=self.memory_limit_mb,
                cluster=ClusterBlock(
                    listen=f"127.0.0.1:{ports[name][1]}",
                    routes=tuple(f"127.0.0.1:{ports[other][1]}" for other in names if other != name),
                    password=secret,
                ),
            )
            for name in names
        ]
        for server in self.servers:
            server.on_restart = self._restarted
        try:
            await asyncio.gather(*(server.start() for server in self.servers))
        except BaseException:
            await self.stop()
            raise
        return self.url

    def server(self, name: str) -> EmbeddedNats:
        for server in self.servers:
            if server.server_name == name:
                return server
        raise EventloomError(f"cluster: no member named {name!r}")

    def describe(self) -> list[NatsServer]:
        return [describe_server(server) for server in self.servers]

    async def _restarted(self) -> None:
        if self.on_restart is not None:
            await self.on_restart()

    async def stop(self) -> None:
        await asyncio.gather(*(server.stop() for server in self.servers), return_exceptions=True)


def describe_server(server: EmbeddedNats) -> NatsServer:
    return NatsServer(
        name=server.server_name or "nats",
        pid=server.pid,
        url=server.url,
        store_dir=str(server.store_dir),
        cluster_port=int(server.cluster.listen.rsplit(":", 1)[1]) if server.cluster else None,
    )


async def wait_for_jetstream(client: Client, timeout: float = _META_LEADER_TIMEOUT_S) -> None:
    """Until JetStream answers: in a cluster, once its members have elected a meta leader and every stream
    already there a leader of its own (after a restart a leaderless stream drops requests unanswered)."""
    deadline = asyncio.get_running_loop().time() + timeout
    await _until_answered(client, "INFO", deadline)
    if server_count(client) <= 1:
        return
    names = await _until_answered(client, "STREAM.NAMES", deadline)
    for stream in names.get("streams") or []:
        await _until_answered(client, f"STREAM.INFO.{stream}", deadline, need_leader=True)


async def _until_answered(
    client: Client, verb: str, deadline: float, *, need_leader: bool = False
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    last = "no answer"
    while loop.time() < deadline:
        try:  # a short wait: a member without a leader may not answer at all
            reply = await client.request(f"$JS.API.{verb}", b"", timeout=1.0)
            info: dict[str, Any] = msgspec.json.decode(reply.data)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError) as exc:
            last = repr(exc)
        else:
            if "error" not in info and (not need_leader or (info.get("cluster") or {}).get("leader")):
                return info
            last = str(info.get("error", {}).get("description", "no leader yet"))
        await asyncio.sleep(0.2)
    raise EventloomError(
        f"JetStream {verb}: no answer with a leader in time (cluster still electing?): {last}"
    )


LocalNats = EmbeddedNats | NatsCluster


def local_nats(settings: Settings, authorization: str) -> LocalNats:
    """The server(s) a node starts when no NATS URL is set: one, or a cluster of `settings.cluster`."""
    limit = settings.nats_memory_limit_mb
    if settings.cluster > 1:
        size = settings.cluster
        return NatsCluster(
            settings.nats_dir, size, settings.sync, authorization=authorization, memory_limit_mb=limit
        )
    return EmbeddedNats(settings.nats_dir, settings.sync, authorization=authorization, memory_limit_mb=limit)


def describe_nats(nats: LocalNats) -> list[NatsServer]:
    return nats.describe() if isinstance(nats, NatsCluster) else [describe_server(nats)]
