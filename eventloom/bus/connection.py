"""Opening NATS connections the same way everywhere."""

from __future__ import annotations

from typing import Any

import nats
from nats.aio.client import Client
from nats.js import JetStreamContext

from eventloom.bus.auth import ROLES, NatsCredentials, inbox_prefix, role_credentials
from eventloom.errors import NodeNotRunningError
from eventloom.settings import Settings


def credentials_of(settings: Settings) -> NatsCredentials | None:
    """`EVENTLOOM_NATS_USER`/`_PASSWORD` when set (a role's own; the user alone: that role's password from
    the data dir), else the data dir's admin (the operator's processes on the node's own data dir), else none
    (a NATS server without authentication)."""
    if settings.nats_user and settings.nats_password:
        return NatsCredentials(settings.nats_user, settings.nats_password)
    if settings.nats_user:  # a role on the node's data volume: its password is in the credentials file
        return role_credentials(settings.data_dir, settings.nats_user) or NatsCredentials(
            settings.nats_user, ""
        )
    return role_credentials(settings.data_dir, "admin")


def server_urls(url: str) -> list[str]:
    """The servers of a NATS URL: one, or a comma-separated list (a cluster's members)."""
    urls = [part.strip() for part in url.split(",") if part.strip()]
    if not urls:
        raise NodeNotRunningError(f"no NATS server in the URL {url!r}")
    return urls


async def connect(
    url: str,
    *,
    name: str = "eventloom",
    persistent: bool = True,
    credentials: NatsCredentials | None = None,
) -> Client:
    """Connect to NATS.

    `url` may list several servers, comma-separated (a cluster's members): nats-py is given them as a list
    (it does not split a string), connects to any one and fails over to the others.
    `persistent` connections (node roles, appenders) reconnect forever with a short wait, so a restarted
    server is picked up again; one-shot CLI connections fail fast with a clear message instead.
    """
    options: dict[str, Any] = {
        "servers": server_urls(url),
        "name": name,
        "connect_timeout": 2,
        "allow_reconnect": persistent,
        # one-shot: each server tried once or twice, then an error (0 would make nats-py retry forever)
        "max_reconnect_attempts": -1 if persistent else 1,
        "reconnect_time_wait": 0.25,
        "ping_interval": 5,
        "max_outstanding_pings": 3,
    }
    if credentials is not None:
        options |= {"user": credentials.user, "password": credentials.password}
        if credentials.user in ROLES:  # a role may subscribe to its own inboxes only
            options["inbox_prefix"] = inbox_prefix(credentials.user)
    if persistent:  # its first connect would retry a refusal forever: learn it from a one-shot first
        await _refused_or_not(url, options, credentials)
    try:
        client: Client = await nats.connect(**options)
    except Exception as exc:
        _raise_refusal(exc, url, credentials)
        raise NodeNotRunningError(f"cannot reach NATS at {url}: {exc}") from exc
    return client


async def _refused_or_not(url: str, options: dict[str, Any], credentials: NatsCredentials | None) -> None:
    async def quiet(error: Exception) -> None:
        return None

    probe = options | {"allow_reconnect": False, "max_reconnect_attempts": 0, "error_cb": quiet}
    try:
        client = await nats.connect(**probe)
    except Exception as exc:
        _raise_refusal(exc, url, credentials)
        return  # not reachable yet: the persistent connection waits for it
    await client.close()


def _raise_refusal(exc: BaseException, url: str, credentials: NatsCredentials | None) -> None:
    if "authorization" in str(exc).lower():
        who = f"as {credentials.user}" if credentials else "without credentials"
        raise NodeNotRunningError(
            f"NATS at {url} refused the connection {who}: set EVENTLOOM_NATS_USER and "
            "EVENTLOOM_NATS_PASSWORD to a role's credentials (`eventloom nats credentials ROLE`)"
        ) from exc


def jetstream(client: Client, timeout: float = 10.0) -> JetStreamContext:
    js: JetStreamContext = client.jetstream(timeout=timeout, publish_async_max_pending=8192)
    return js
