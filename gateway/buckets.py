"""Every KV bucket of a deployment, created by the node at its replica count before anyone else needs one.

The node connects as `admin`, the only bus role that may create a stream: a role started as a process of
its own (`gateway http`, `query serve`, `producer run`, `projector run`) finds its buckets made and only
reads and writes them (eventloom/bus/auth.py). The node also knows the deployment's replica count, which
a process that created a bucket on first use (the operator's CLI) may not, and `ensure_bucket` never
lowers a count it finds.
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
    """Every bucket in `NODE_BUCKETS`, at (at least) `replicas`."""
    for name, ttl in NODE_BUCKETS:
        await ensure_bucket(client, name, replicas=replicas, ttl=ttl)
