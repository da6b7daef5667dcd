"""The derived-memory producers are on by default, and what they propose survives a rebuild exactly.

Proposals are events in the log, not state of a read model: a rebuilt graph shows the same candidates and
`same_as` links (same ids), and running the producers again over the whole log emits nothing a second time.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.workers import enabled_producers, producer_runner
from projectors.backends import EmbeddedGraphProjector
from projectors.emitter import ProducerProjection
from projectors.plugins import load_producer, load_projector
from projectors.rebuild import rebuild
from tests.runtime_support import drained, running
from tests.test_consolidation_live import append_sessions

pytestmark = pytest.mark.anyio
DERIVED = ("consolidation.candidate.created", "inference.edge.generated")
PROPOSALS = (
    "MATCH (e:Entity) WHERE e.entity_type = 'consolidation_candidate' AND e.valid_to IS NULL "
    "RETURN e.session AS s, e.name AS n ORDER BY s, n"
)
SAME_AS = (
    "MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE r.relation_type = 'same_as' AND r.valid_to IS NULL "
    "RETURN a.name AS a, b.name AS b, r.edge_id AS id ORDER BY id"
)


async def derived_ids(log: EventLog) -> Counter[str]:
    ids: Counter[str] = Counter()
    async for event in log.events():
        if event.type in DERIVED:
            ids[event.payload.get("candidate_id") or event.payload.get("edge_id") or ""] += 1
    return ids


async def run_producers(log: EventLog, names: list[str], *, replay_as: str | None = None) -> None:
    """As `eventloom up` runs them; `replay_as` names a new consumer, which reads the log from the start."""
    projection = producer_runner(log, names, None).projector
    if replay_as is not None:
        projection = ProducerProjection([load_producer(n, log.settings) for n in names], log, name=replay_as)
    async with running(log, projection, role="producer") as live:
        await drained(log, live.consumer)


async def snapshot(projector: EmbeddedGraphProjector) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return await projector.store.query(PROPOSALS), await projector.store.query(SAME_AS)


async def test_default_producers_propose_once_and_a_rebuild_shows_the_same_proposals(
    log: EventLog, settings: Settings
) -> None:
    names = enabled_producers(settings)
    assert {"consolidation", "entity_resolution"} <= set(names)
    await append_sessions(log)
    await log.append(
        "s2",
        "memory.fact.asserted",
        "agent",
        {"entities": [{"name": "Auth Service", "entity_type": "service", "summary": "login"}]},
    )
    await log.append(
        "s2",
        "memory.fact.asserted",
        "agent",
        {"entities": [{"name": "auth-service", "entity_type": "service", "summary": "tokens"}]},
    )
    await run_producers(log, names)
    first = await derived_ids(log)
    assert first and set(first.values()) == {1}, first
    assert any(i.startswith("cand-") for i in first)

    await run_producers(log, names, replay_as="replay")  # the whole log again: nothing new, ever
    assert await derived_ids(log) == first

    projector = load_projector("graph", settings)
    assert isinstance(projector, EmbeddedGraphProjector)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        live_proposals, live_links = await snapshot(projector)
        assert live_proposals and live_links
        await rebuild(log, "graph")
        for _ in range(150):
            if projector.generation == 2:
                break
            await asyncio.sleep(0.1)
        assert projector.generation == 2
        assert await snapshot(projector) == (live_proposals, live_links)
