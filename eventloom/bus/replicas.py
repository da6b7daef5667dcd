"""Replica counts the NATS servers cannot place: waited for while a cluster forms, else explained."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from nats.aio.client import Client

from eventloom.errors import EventloomError

# JetStream's answers when a stream asks for more replicas than there are servers to hold them
_TOO_FEW_SERVERS: Final = (10005, 10023, 10074)  # no suitable peers; insufficient resources; non-clustered
_PLACEMENT_WAIT_S: Final = 30.0


def server_count(client: Client) -> int:
    """The servers this client knows of: those it was given and those the cluster told it about."""
    return max(1, len({(url.hostname, url.port) for url in client.servers}))


def _too_few(error: dict[str, Any] | None, replicas: int) -> bool:
    return error is not None and replicas > 1 and error.get("err_code") in _TOO_FEW_SERVERS


async def placed(
    client: Client, replicas: int, attempt: Callable[[], Awaitable[dict[str, Any]]]
) -> dict[str, Any]:
    """`attempt` (a stream create or update) until JetStream places its replicas: a cluster whose members
    have not all joined yet refuses placement like one with too few servers, for a few seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _PLACEMENT_WAIT_S
    while True:
        response = await attempt()
        error = response.get("error")
        if not _too_few(error, replicas) or replicas > server_count(client) or loop.time() > deadline:
            return response
        await asyncio.sleep(0.5)


def replicas_error(client: Client, what: str, replicas: int, error: dict[str, Any]) -> EventloomError:
    """The error for a failed stream create/update: when the servers are too few for `replicas`, one that
    says so, naming both counts and what to change."""
    description = error.get("description")
    if not _too_few(error, replicas):
        return EventloomError(f"{what}: {description}")
    servers = server_count(client)
    return EventloomError(
        f"{what}: {replicas} replicas asked for, but NATS could not place them on the {servers} "
        f"server{'s' if servers != 1 else ''} it knows of (JetStream: {description}); set "
        "EVENTLOOM_REPLICAS / `eventloom up --replicas` to at most the servers up, run more servers "
        "(`eventloom up --cluster 3`), or check that every server of the cluster is up and routed"
    )
