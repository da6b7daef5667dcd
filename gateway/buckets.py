"""Every KV bucket of a deployment, created by the node at its replica count before anyone else needs one.

Processes that create a bucket on first use (the CLI, a worker started on its own) may not know the
deployment's replica count; the node does, so with replicas > 1 it creates them all first, and `ensure_bucket`
never lowers a count it finds.
"""

from __future__ import annotations

from typing import Final

from nats.aio.client import Client

from eventloom.appender import IDEMPOTENCY_BUCKET
from eventloom.bus.buckets import ensure_bucket
from eventloom.bus.peers import PEERS_BUCKET, PEERS_MAX_AGE_S
from eventloom.dlq import RETRY_BUCKET
from eventloom.quarantine import QUARANTINE_BUCKET
from projectors.emitter import FENCE_BUCKET
from projectors.lease import LEASE_BUCKET
from projectors.log_view import STATE_BUCKET
from projectors.status import STATS_BUCKET, STATS_TTL_S

NODE_BUCKETS: Final[tuple[tuple[str, float | None], ...]] = (
    (IDEMPOTENCY_BUCKET, None),
    (PEERS_BUCKET, PEERS_MAX_AGE_S),
    (RETRY_BUCKET, None),
    (QUARANTINE_BUCKET, None),
    (FENCE_BUCKET, None),
    (LEASE_BUCKET, None),
    (STATE_BUCKET, None),
    (STATS_BUCKET, STATS_TTL_S),
)


async def ensure_node_buckets(client: Client, replicas: int) -> None:
    """With `replicas` > 1, every bucket in `NODE_BUCKETS` at (at least) that count; with 1, nothing: each
    is created at R1 when first used, as before."""
    if replicas <= 1:
        return
    for name, ttl in NODE_BUCKETS:
        await ensure_bucket(client, name, replicas=replicas, ttl=ttl)
