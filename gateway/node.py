"""The node: embedded NATS when no URL is set, the stream, and the roles (for now the ledger mirror)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os

from nats.aio.client import Client

from eventloom.bus.connection import connect
from eventloom.bus.embedded import EmbeddedNats
from eventloom.bus.stream import ensure_stream
from eventloom.event import utc_timestamp
from eventloom.keys import KeyStore
from eventloom.ledger.mirror import LedgerMirror
from eventloom.runtime import RuntimeInfo, write_runtime
from eventloom.settings import Settings

log = logging.getLogger(__name__)
_RETRY_S = 0.5


class Node:
    """Runs every role of a deployment in one process until `stop` is set."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.embedded: EmbeddedNats | None = None
        self.url: str | None = settings.nats_url
        self.ready = asyncio.Event()
        self.mirror: LedgerMirror | None = None

    async def run(self, stop: asyncio.Event) -> None:
        settings = self.settings
        await asyncio.to_thread(settings.data_dir.mkdir, parents=True, exist_ok=True)
        keys = KeyStore(settings.data_dir)
        await asyncio.to_thread(keys.active_signer)  # generate the node's key on first start
        if self.url is None:
            self.embedded = EmbeddedNats(settings.nats_dir, settings.sync)
            self.url = await self.embedded.start()
            self.embedded.on_restart = lambda: asyncio.to_thread(self._write_runtime)
        client = await connect(self.url, name="eventloom-node")
        try:
            layout = await ensure_stream(client, settings)
            self.mirror = LedgerMirror(client, layout, keys, settings.ledger_dir)
            await asyncio.to_thread(self._write_runtime)
            self.ready.set()
            await self._supervise(self._run_mirror(client, stop), stop)
        finally:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(settings.runtime_file.unlink)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.drain(), timeout=5)
            if self.embedded is not None:
                await self.embedded.stop()

    async def _run_mirror(self, client: Client, stop: asyncio.Event) -> None:
        """The mirror restarts after a failure (e.g. NATS restarting) instead of taking the node down."""
        assert self.mirror is not None
        while not stop.is_set():
            try:
                await self.mirror.run(stop)
            except Exception:
                log.exception("ledger mirror failed; restarting in %.1fs", _RETRY_S)
                await asyncio.sleep(_RETRY_S)

    async def _supervise(self, role: object, stop: asyncio.Event) -> None:
        assert asyncio.iscoroutine(role)
        task = asyncio.create_task(role, name="role")
        stopper = asyncio.create_task(stop.wait(), name="stop")
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        await asyncio.wait({task}, timeout=15)
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _write_runtime(self) -> None:
        assert self.url is not None
        write_runtime(
            self.settings.runtime_file,
            RuntimeInfo(
                pid=os.getpid(),
                nats_url=self.url,
                embedded=self.embedded is not None,
                nats_pid=self.embedded.pid if self.embedded else None,
                data_dir=str(self.settings.data_dir),
                started_at=utc_timestamp(),
                roles=["nats" if self.embedded else "nats-external", "ledger-mirror"],
            ),
        )
