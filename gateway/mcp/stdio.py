"""`eventloom mcp`: the MCP server on stdin/stdout for one local agent, on the node it finds or starts."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from gateway.mcp.backend import open_backend
from gateway.mcp.server import EventloomMCP, LocalOperator
from gateway.node import Node

log = logging.getLogger(__name__)
_NODE_START_S = 60.0


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
        log.info("started an embedded node at %s for this MCP session", node.url)
        yield node.url
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def run_stdio(settings: Settings) -> None:
    """Serve one MCP client on stdin/stdout until it disconnects."""
    async with node_url(settings) as url:
        backend = await open_backend(settings, url)
        try:
            await EventloomMCP(backend, LocalOperator()).run_stdio_async()
        finally:
            await backend.log.close()
