"""Explaining a replica count the NATS servers cannot place."""

from __future__ import annotations

from typing import Any, Final

from nats.aio.client import Client

from eventloom.errors import EventloomError

# JetStream's answers when a stream asks for more replicas than there are servers to hold them
_TOO_FEW_SERVERS: Final = (10005, 10023, 10074)  # no suitable peers; insufficient resources; non-clustered


def server_count(client: Client) -> int:
    """The servers this client knows of: those it was given and those the cluster told it about."""
    return max(1, len({(url.hostname, url.port) for url in client.servers}))


def replicas_error(client: Client, what: str, replicas: int, error: dict[str, Any]) -> EventloomError:
    """The error for a failed stream create/update: when the servers are too few for `replicas`, one that
    says so, naming both counts and what to change."""
    description = error.get("description")
    if error.get("err_code") not in _TOO_FEW_SERVERS or replicas <= 1:
        return EventloomError(f"{what}: {description}")
    servers = server_count(client)
    return EventloomError(
        f"{what}: {replicas} replicas asked for, but NATS has {servers} server{'s' if servers != 1 else ''} "
        f"to place them on (JetStream: {description}); set EVENTLOOM_REPLICAS / `eventloom up --replicas` "
        f"to at most {servers}, or run more servers (`eventloom up --cluster 3`)"
    )
