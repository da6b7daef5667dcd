"""Opening NATS connections the same way everywhere."""

from __future__ import annotations

from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from eventloom.errors import NodeNotRunningError


async def connect(url: str, *, name: str = "eventloom", persistent: bool = True) -> Client:
    """Connect to NATS.

    `persistent` connections (node roles, appenders) reconnect forever with a short wait, so a restarted
    server is picked up again; one-shot CLI connections fail fast with a clear message instead.
    """
    options: dict[str, Any] = {
        "name": name,
        "connect_timeout": 2,
        "allow_reconnect": persistent,
        "max_reconnect_attempts": -1 if persistent else 0,
        "reconnect_time_wait": 0.25,
        "ping_interval": 5,
        "max_outstanding_pings": 3,
    }
    try:
        client: Client = await nats.connect(url, **options)
    except Exception as exc:
        raise NodeNotRunningError(f"cannot reach NATS at {url}: {exc}") from exc
    return client


def jetstream(client: Client, timeout: float = 10.0) -> JetStreamContext:
    js: JetStreamContext = client.jetstream(timeout=timeout, publish_async_max_pending=8192)
    return js
