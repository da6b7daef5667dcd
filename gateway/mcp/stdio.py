"""`eventloom mcp`: the MCP server on stdin/stdout for one local agent (the CLI finds or starts the node)."""

from __future__ import annotations

from eventloom.bus.heartbeat import HeartbeatPublisher
from eventloom.settings import Settings
from gateway.access.backend import open_backend
from gateway.mcp.server import EventloomMCP, LocalOperator


async def run_stdio(settings: Settings, url: str) -> None:
    """Serve one MCP client on stdin/stdout, from the NATS at `url`, until it disconnects."""
    backend = await open_backend(settings, url)
    heartbeat = HeartbeatPublisher(
        backend.log.client, settings, role="gateway-stdio", capabilities=["mcp-stdio"]
    )
    try:
        async with heartbeat.running():
            await EventloomMCP(backend, LocalOperator()).run_stdio_async()
    finally:
        await backend.log.close()
