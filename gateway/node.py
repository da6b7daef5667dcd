"""The node: embedded NATS when no URL is set, the stream, and the roles: the ledger mirror, projectors,
producers, the query service over the read models its projectors keep, and the HTTP gateway (if asked)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

import nats.errors
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.auth import authorization_block, ensure_passwords
from eventloom.bus.cluster import LocalNats, describe_nats, local_nats, wait_for_jetstream
from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.heartbeat import HeartbeatPublisher, PeerWatcher
from eventloom.bus.stream import ensure_stream
from eventloom.event import utc_timestamp
from eventloom.keys import KeyStore
from eventloom.ledger.mirror import MIRROR_CONSUMER, LedgerMirror
from eventloom.log import EventLog
from eventloom.malloc import fix_mmap_threshold, limit_arenas, trim_periodically
from eventloom.runtime import LOCK_NAME, NodeLock, RuntimeInfo, read_runtime, write_runtime
from eventloom.settings import Settings
from gateway.buckets import ensure_node_buckets
from gateway.heartbeats import roles_heartbeat
from gateway.memory_role import MEMORY_PROJECTORS, LiveReadModels
from gateway.supervisor import Role, RoleSupervisor
from gateway.workers import enabled_producers, enabled_projectors, producer_runner, run_projector
from projectors.partitions import consumer_name
from readmodels.query.service import serve_memory

log = logging.getLogger(__name__)
_NODE_START_S = 60.0
_ROLES_START_S = 20.0


GatewayRole = Callable[[str, asyncio.Event, Callable[[str], Awaitable[None]]], Awaitable[None]]
"""Serves agents from the node's NATS URL until `stop`, and says at which URL once it listens (the MCP
gateway over HTTP: `gateway.mcp.http.http_role`). The node runs it as a role and records the URL."""


@contextlib.asynccontextmanager
async def node_url(settings: Settings) -> AsyncIterator[str]:
    """`EVENTLOOM_NATS_URL`, else the node running on this data dir, else a node started in this process
    (embedded NATS and every role) that stops when the block ends."""
    running = read_runtime(settings.runtime_file)
    if settings.nats_url or running is not None:
        yield settings.nats_url or running.nats_url  # type: ignore[union-attr]
        return
    node, stop = Node(settings), asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    ready = asyncio.create_task(node.ready.wait())
    await asyncio.wait({task, ready}, timeout=_NODE_START_S, return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if task.done():
        task.result()  # raises what stopped the node
    try:
        if not node.ready.is_set() or node.url is None:
            raise TimeoutError(f"the embedded node did not start within {_NODE_START_S:g}s")
        log.info("started an embedded node at %s for this process", node.url)
        yield node.url
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


class Node:
    """Runs every role of a deployment in one process until `stop` is set."""

    def __init__(self, settings: Settings, *, gateway: GatewayRole | None = None) -> None:
        self.settings = settings
        self.gateway = gateway
        self.http_url: str | None = None
        self.embedded: LocalNats | None = None  # the server(s) it started: one, or a cluster
        self.url: str | None = settings.nats_url
        self.ready = asyncio.Event()
        self.mirror: LedgerMirror | None = None
        self.roles: list[str] = []
        self.supervisor = RoleSupervisor(on_change=self._record_runtime)
        self.started_at = utc_timestamp()
        self._recording = asyncio.Lock()
        self.heartbeat: HeartbeatPublisher | None = None  # this node's, while it runs
        self.peers: PeerWatcher | None = None  # its live table of every process's heartbeat

    async def run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        await asyncio.to_thread(settings.data_dir.mkdir, parents=True, exist_ok=True)
        lock = NodeLock(settings.data_dir / LOCK_NAME)
        await asyncio.to_thread(lock.acquire)
        try:
            await self._run(stop)
        finally:
            lock.release()

    async def _run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        limit_arenas(settings.malloc_arenas)  # before the roles start their threads
        fix_mmap_threshold(settings.malloc_mmap_threshold_kib)
        keys = KeyStore(settings.data_dir)
        await asyncio.to_thread(keys.active_signer)  # generate the node's key on first start
        if self.url is None:
            passwords = await asyncio.to_thread(ensure_passwords, settings.data_dir)
            self.embedded = local_nats(settings, authorization_block(passwords, settings.stream))
            self.url = await self.embedded.start()
            self.embedded.on_restart = self._record_runtime
        client = await connect(self.url, name="eventloom-node", credentials=credentials_of(settings))
        event_log: EventLog | None = None
        try:
            await wait_for_jetstream(client)  # a cluster's members first elect a meta leader
            layout = await ensure_stream(client, settings)
            await ensure_node_buckets(client, settings.replicas)
            mirror_trouble = self.supervisor.reporter("ledger-mirror")
            self.mirror = LedgerMirror(client, layout, keys, settings.ledger_dir, on_trouble=mirror_trouble)
            event_log = await EventLog.open(settings, url=self.url)
            roles: dict[str, Role] = {"ledger-mirror": lambda: self.mirror.run(stop)}  # type: ignore[union-attr]
            roles.update(worker_roles(event_log, stop, supervisor=self.supervisor))
            if self.gateway is not None:
                roles["gateway-http"] = self._gateway_role(self.gateway, stop)
            self.roles = sorted(roles)
            producers = enabled_producers(settings) if "producers" in roles else []
            self.heartbeat = roles_heartbeat(
                client, settings, role="node", roles=self.roles, producers=producers
            )
            self.peers = PeerWatcher(client, settings, own_id=self.heartbeat.id)
            trimming = asyncio.create_task(trim_periodically(stop, settings.memory_trim_s))
            try:
                async with self.heartbeat.running(), self.peers.running():
                    supervising = asyncio.create_task(self.supervisor.run(roles, stop))
                    consumers = role_consumers(self.roles, producers)
                    await self._until_consumers_exist(client, layout.name, consumers, supervising)
                    self.ready.set()  # before the record: `_record_runtime` writes only once ready
                    await self._record_runtime()
                    await supervising
            finally:
                trimming.cancel()
        finally:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(settings.runtime_file.unlink)
            for closing in (event_log.close() if event_log else None, client.drain()):
                if closing is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(closing, timeout=5)
            if self.embedded is not None:
                await self.embedded.stop()

    def _gateway_role(self, gateway: GatewayRole, stop: asyncio.Event) -> Role:
        async def serving(url: str) -> None:
            self.http_url = url
            if self.heartbeat is not None:
                self.heartbeat.urls = [url]
            await self._record_runtime()

        assert self.url is not None
        url = self.url
        return lambda: gateway(url, stop, serving)

    async def _until_consumers_exist(
        self, client: Client, stream: str, consumers: dict[str, str], supervising: asyncio.Task[None]
    ) -> None:
        """Ready means serving: wait (at most `_ROLES_START_S`) until each role's durable consumer exists, or
        the role is failing (`status` says why), so that `up --detach` returns a node whose roles read."""
        js = client.jetstream()
        deadline = asyncio.get_running_loop().time() + _ROLES_START_S
        waiting = dict(consumers)
        while waiting and asyncio.get_running_loop().time() < deadline and not supervising.done():
            with contextlib.suppress(nats.errors.Error, nats.js.errors.Error, TimeoutError):
                existing = {info.name for info in await js.consumers_info(stream)}
                failing = self.supervisor.failing()
                waiting = {c: r for c, r in waiting.items() if c not in existing and r not in failing}
            if waiting:
                await asyncio.sleep(0.05)
        if supervising.done():
            supervising.result()  # the roles stopped before they started: say why
        if waiting:
            log.warning("ready without the consumers of %s yet", ", ".join(sorted(waiting.values())))

    async def _record_runtime(self) -> None:
        """Rewrite `<data>/runtime.json` from the node's state now; one write at a time, in call order.
        Nothing is written before the node is ready: the file says a node serves here."""
        if not self.ready.is_set():
            return
        assert self.url is not None
        info = RuntimeInfo(
            pid=os.getpid(),
            nats_url=self.url,
            embedded=self.embedded is not None,
            nats_pid=self.embedded.pid if self.embedded else None,
            nats_servers=describe_nats(self.embedded) if self.embedded else [],
            data_dir=str(self.settings.data_dir),
            started_at=self.started_at,
            roles=["nats" if self.embedded else "nats-external", *self.roles],
            http_url=self.http_url,
            role_states=dict(self.supervisor.states),
            producers=enabled_producers(self.settings) if "producers" in self.roles else [],
        )
        async with self._recording:
            await asyncio.to_thread(write_runtime, self.settings.runtime_file, info)


def worker_roles(
    event_log: EventLog,
    stop: asyncio.Event,
    *,
    only: tuple[str, ...] | None = None,
    supervisor: RoleSupervisor | None = None,
) -> dict[str, Role]:
    """Every enabled projector (or those of `only`), the query service over the memory read models among
    them, and one shared consumer for every enabled producer (none with `only`). With the `supervisor` that
    will run them, projectors report their troubles to it and the query service's health names its failing
    roles."""
    settings = event_log.settings
    failing = supervisor.failing if supervisor is not None else None
    roles: dict[str, Role] = {}
    live = LiveReadModels()
    projectors = [name for name in enabled_projectors(settings) if only is None or name in only]
    for name in projectors:
        role = f"projector:{name}"
        trouble = supervisor.reporter(role) if supervisor is not None else None
        roles[role] = partial(run_projector, event_log, name, None, stop, live, trouble)
    if set(projectors) & set(MEMORY_PROJECTORS):
        roles["query"] = lambda: serve_memory(event_log.client, live.memory(), stop, failing=failing)
    producers = enabled_producers(settings) if only is None else []
    if producers:
        roles["producers"] = lambda: producer_runner(event_log, producers, None).run(stop)
    return roles


def role_consumers(roles: list[str], producers: list[str]) -> dict[str, str]:
    """The durable consumer each of `roles` reads through, and the role (the query service has none)."""
    consumers = {MIRROR_CONSUMER: "ledger-mirror"} if "ledger-mirror" in roles else {}
    for role in roles:
        if role.startswith("projector:"):
            consumers[consumer_name("projector", role.removeprefix("projector:"), None)] = role
    if "producers" in roles and producers:
        consumers[consumer_name("producer", "-".join(sorted(producers)), None)] = "producers"
    return consumers


def role_of_consumer(consumer: str, node: RuntimeInfo) -> str | None:
    """The role of `node` that reads through `consumer` (None: another process's, or a rebuild's)."""
    return role_consumers(node.roles, node.producers).get(consumer)
