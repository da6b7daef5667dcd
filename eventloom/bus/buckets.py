"""KV buckets, created or found the same way everywhere: with the deployment's replica count, never fewer
than a bucket already has."""

from __future__ import annotations

import asyncio
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from eventloom.bus.replicas import placed, replicas_error
from eventloom.bus.stream import jetstream_api
from eventloom.errors import EventloomError

_STREAM_NOT_FOUND = 10059
_STREAM_NAME_IN_USE = 10058  # created meanwhile by another process
_LOOKUP_ATTEMPTS = 8
_LOOKUP_TIMEOUT_S = 2.0


async def ensure_bucket(
    client: Client,
    name: str,
    *,
    replicas: int = 1,
    history: int = 1,
    ttl: float | None = None,
    js: JetStreamContext | None = None,
) -> KeyValue:
    """The bucket `name`, created with `replicas`, `history` and `ttl` (seconds) if it does not exist.

    An existing bucket is used as it is, whatever its history or TTL, except that one with fewer than
    `replicas` replicas is scaled up (its `KV_<name>` stream updated); one with more keeps them. `js`: the
    JetStream context the bucket's reads and writes use (default: the client's, default timeout).
    """
    js = js or client.jetstream()
    config = await _existing_config(client, name)
    if config is None:
        created = await placed(client, replicas, lambda: _create(js, name, history, ttl, replicas))
        if "bucket" in created:
            bucket: KeyValue = created["bucket"]
            return bucket
        if created["error"].get("err_code") != _STREAM_NAME_IN_USE:
            raise replicas_error(client, f"bucket {name}", replicas, created["error"])
        config = await _existing_config(client, name)
        if config is None:
            raise EventloomError(f"bucket {name}: neither created nor found")
    if int(config.get("num_replicas", 1)) < replicas:
        scaled = config | {"num_replicas": replicas}
        response = await placed(
            client, replicas, lambda: jetstream_api(client, f"STREAM.UPDATE.KV_{name}", scaled)
        )
        if "error" in response:
            raise replicas_error(client, f"bucket {name}", replicas, response["error"])
    return KeyValue(
        name=name, stream=f"KV_{name}", pre=f"$KV.{name}.", js=js, direct=bool(config.get("allow_direct"))
    )


async def bucket_replicas(client: Client, name: str) -> int | None:
    """The replica count of bucket `name` (None: no such bucket)."""
    config = await _existing_config(client, name)
    return None if config is None else int(config.get("num_replicas", 1))


async def _existing_config(client: Client, name: str) -> dict[str, Any] | None:
    info: dict[str, Any] = {}
    for attempt in range(_LOOKUP_ATTEMPTS):
        try:  # a bucket whose stream is electing a leader (a server just died) leaves the request unanswered
            info = await jetstream_api(client, f"STREAM.INFO.KV_{name}", timeout=_LOOKUP_TIMEOUT_S)
            break
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            if attempt == _LOOKUP_ATTEMPTS - 1:
                raise
            await asyncio.sleep(0.2)
    if "error" not in info:
        config: dict[str, Any] = info["config"]
        return config
    if info["error"].get("err_code") == _STREAM_NOT_FOUND:
        return None
    raise EventloomError(f"bucket {name}: {info['error'].get('description')}")


async def _create(
    js: JetStreamContext, name: str, history: int, ttl: float | None, replicas: int
) -> dict[str, Any]:
    """A new bucket as {"bucket": ...}, or the server's refusal as {"error": ...} (for `placed`)."""
    try:
        bucket = await js.create_key_value(bucket=name, history=history, ttl=ttl, replicas=replicas)
    except nats.js.errors.APIError as exc:
        return {"error": {"err_code": exc.err_code, "description": exc.description}}
    return {"bucket": bucket}
