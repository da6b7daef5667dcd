"""What each kind of process says in its heartbeat (docs/operations.md#peers): its role, what it runs, and
the lag of the consumers it reads through."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nats.aio.client import Client

from eventloom.bus.heartbeat import HeartbeatPublisher
from eventloom.settings import Settings
from projectors.partitions import consumer_name


def consumers_of(roles: Iterable[str], producers: Sequence[str]) -> list[str]:
    """The durable consumers that the node roles `roles` read through (as `worker_roles` runs them)."""
    consumers: list[str] = []
    for role in roles:
        if role == "ledger-mirror":
            consumers.append(role)
        elif role.startswith("projector:"):
            consumers.append(consumer_name("projector", role.removeprefix("projector:"), None))
        elif role == "producers" and producers:
            consumers.append(consumer_name("producer", "-".join(sorted(producers)), None))
    return consumers


def roles_heartbeat(
    client: Client,
    settings: Settings,
    *,
    role: str,
    roles: Sequence[str],
    producers: Sequence[str] = (),
) -> HeartbeatPublisher:
    """The heartbeat of a process running node roles (the node itself, `eventloom query serve`): its roles
    and producers as capabilities, the lag of their consumers."""
    capabilities = [*roles, *(f"producer:{name}" for name in producers)]
    return consumers_heartbeat(
        client,
        settings,
        role=role,
        capabilities=sorted(capabilities),
        consumers=consumers_of(roles, producers),
    )


def consumers_heartbeat(
    client: Client,
    settings: Settings,
    *,
    role: str,
    capabilities: Sequence[str],
    consumers: Sequence[str],
) -> HeartbeatPublisher:
    """A heartbeat that reports the lag of `consumers` (on the settings' stream)."""
    return HeartbeatPublisher(client, settings, role=role, capabilities=capabilities, consumers=consumers)
