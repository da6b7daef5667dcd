"""KV buckets, created or found the same way everywhere: with the deployment's replica count, never fewer
than a bucket already has."""

from __future__ import annotations

from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from eventloom.bus.replicas import placed, replicas_error
from eventloom.bus.stream import jetstream_api, stream_info
from eventloom.errors import EventloomError

_STREAM_NOT_FOUND = 10059
_STREAM_NAME_IN_USE = 10058  # created meanwhile by another process
_NEEDS_ADMIN = (
    "{}: no answer; only the bus's admin may create or change a bucket (start the node first: it creates "
    "every bucket, or connect as admin); as admin, the server was too busy or without a leader: retry"
)


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
            return _read_from_leader(js, name)
        if created["error"].get("err_code") != _STREAM_NAME_IN_USE:
            raise replicas_error(client, f"bucket {name}", replicas, created["error"])
        config = await _existing_config(client, name)
        if config is None:
            raise EventloomError(f"bucket {name}: neither created nor found")
    if int(config.get("num_replicas", 1)) < replicas:
        scaled = config | {"num_replicas": replicas}
        response = await placed(client, replicas, lambda: _update(client, name, scaled))
        if "error" in response:
            raise replicas_error(client, f"bucket {name}", replicas, response["error"])
    return _read_from_leader(js, name)


def _read_from_leader(js: JetStreamContext, name: str) -> KeyValue:
    """The bucket with every read answered by its stream's leader. A direct get may be answered by any
    replica, and one that just came back from a damaged store can miss entries for a moment (seen in the
    fault suite): an idempotency record, a fence or a lease read there would be wrong, not just old."""
    return KeyValue(name=name, stream=f"KV_{name}", pre=f"$KV.{name}.", js=js, direct=False)


async def bucket_replicas(client: Client, name: str) -> int | None:
    """The replica count of bucket `name` (None: no such bucket)."""
    config = await _existing_config(client, name)
    return None if config is None else int(config.get("num_replicas", 1))


async def _existing_config(client: Client, name: str) -> dict[str, Any] | None:
    info = await stream_info(client, f"KV_{name}")
    if "error" not in info:
        config: dict[str, Any] = info["config"]
        return config
    if info["error"].get("err_code") == _STREAM_NOT_FOUND:
        return None
    raise EventloomError(f"bucket {name}: {info['error'].get('description')}")


async def _update(client: Client, name: str, config: dict[str, Any]) -> dict[str, Any]:
    try:
        return await jetstream_api(client, f"STREAM.UPDATE.KV_{name}", config)
    except nats.errors.TimeoutError:  # the server drops a refused request unanswered (or was too slow)
        scaling = f"scaling bucket {name} to {config['num_replicas']} replicas"
        raise EventloomError(_NEEDS_ADMIN.format(scaling)) from None


async def _create(
    js: JetStreamContext, name: str, history: int, ttl: float | None, replicas: int
) -> dict[str, Any]:
    """A new bucket as {"bucket": ...}, or the server's refusal as {"error": ...} (for `placed`)."""
    try:
        bucket = await js.create_key_value(bucket=name, history=history, ttl=ttl, replicas=replicas)
    except nats.js.errors.APIError as exc:
        return {"error": {"err_code": exc.err_code, "description": exc.description}}
    except nats.errors.TimeoutError:
        raise EventloomError(_NEEDS_ADMIN.format(f"creating bucket {name}")) from None
    return {"bucket": bucket}
