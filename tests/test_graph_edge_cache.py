"""The store's open-edge cache changes nothing but speed: warm, cold and thrashing caches, same graph."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from projectors.graph.registry import extract
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.edge_cache import Fetch, OpenEdgeCache
from readmodels.graph.plan import EdgeDemands, RelationRow
from tests.test_graph_bulk import full_story, graph_rows
from tests.test_graph_support import SessionLog, fact, ts

pytestmark = pytest.mark.anyio
NAMES = [("api", "service"), ("db", "database"), ("queue", "service"), ("team-a", "team"), ("team-b", "team")]
RELATIONS = ["depends_on", "owned_by", "uses"]


def churn(seed: int, events: int = 120) -> SessionLog:
    """Versions, relations, invalidations and relation invalidations in a random order: every path by
    which an open edge is created, restated or closed."""
    rng = random.Random(seed)
    log = SessionLog()
    for n in range(events):
        roll = rng.random()
        source, target = rng.sample(NAMES, 2)
        relation = rng.choice(RELATIONS)
        if roll < 0.55:
            entities = [(name, kind, f"v{rng.randint(0, 3)}") for name, kind in rng.sample(NAMES, 2)]
            relations = [(source[0], relation, target[0])] if rng.random() < 0.7 else []
            log.add("memory.fact.asserted", fact(*entities, relations=relations))
        elif roll < 0.7:
            name, kind = rng.choice(NAMES)
            log.add("memory.invalidated", {"name": name, "entity_type": kind, "reason": "gone"})
        elif roll < 0.85:
            edge = {"source": source[0], "target": target[0], "relation_type": relation}
            log.add("memory.invalidated", {"relation": edge, "invalid_at": ts(n + 1), "reason": "no"})
        else:
            edge = {"source": source[0], "target": target[0], "relation_type": relation}
            log.add(
                "inference.edge.generated", {**edge, "confidence": 0.5, "method": "m", "edge_id": f"e{n}"}
            )
    return log


async def apply_in_batches(path: Path, log: SessionLog, batch: int, *, capacity: int) -> None:
    """`capacity=0` remembers nothing: every batch reads its edges from the database, as before the cache."""
    store = LadybugGraphStore(path)
    store._open_edges = OpenEdgeCache(capacity)
    async with store:
        for start in range(0, len(log.events), batch):
            await store.apply("graph", [extract(e) for e in log.events[start : start + batch]])


@pytest.mark.parametrize("seed", [1, 2])
async def test_warm_cold_and_thrashing_caches_write_the_same_graph(tmp_path: Path, seed: int) -> None:
    log = churn(seed)
    await apply_in_batches(tmp_path / "cold" / "g.lbug", log, 4, capacity=0)
    await apply_in_batches(tmp_path / "warm" / "g.lbug", log, 4, capacity=50_000)
    await apply_in_batches(tmp_path / "tiny" / "g.lbug", log, 4, capacity=2)
    cold = graph_rows(tmp_path / "cold" / "g.lbug")
    assert len(cold["RELATES"]) > 20
    assert graph_rows(tmp_path / "warm" / "g.lbug") == cold
    assert graph_rows(tmp_path / "tiny" / "g.lbug") == cold


async def test_the_full_story_is_the_same_with_a_warm_cache(tmp_path: Path) -> None:
    log = full_story()
    await apply_in_batches(tmp_path / "cold" / "g.lbug", log, 2, capacity=0)
    await apply_in_batches(tmp_path / "warm" / "g.lbug", log, 2, capacity=50_000)
    assert graph_rows(tmp_path / "warm" / "g.lbug") == graph_rows(tmp_path / "cold" / "g.lbug")


async def test_a_warm_store_reads_no_edges_it_already_knows(tmp_path: Path) -> None:
    log = SessionLog()
    log.add(
        "memory.fact.asserted",
        fact(("api", "service", "v1"), ("db", "database", "pg"), relations=[("api", "depends_on", "db")]),
    )
    log.add("memory.fact.asserted", fact(("api", "service", "v2"), relations=[("api", "depends_on", "db")]))
    log.add("memory.fact.asserted", fact(("api", "service", "v3"), relations=[("api", "depends_on", "db")]))
    fetched: list[int] = []
    cache = OpenEdgeCache()
    real_load = cache.load

    def counting_load(demands: EdgeDemands, fetch: Fetch) -> list[RelationRow]:
        def counted(missing: EdgeDemands) -> list[RelationRow]:
            fetched.append(len(missing.entities))
            return fetch(missing)

        return real_load(demands, counted)

    cache.load = counting_load  # type: ignore[method-assign]
    store = LadybugGraphStore(tmp_path / "g.lbug")
    store._open_edges = cache
    async with store:
        for event in log.events:
            await store.apply("graph", [extract(event)])
        (current,) = await store.relations("s1")
        assert current.source_event_seq == 1  # restated unchanged: the first statement's edge stands
    assert fetched == []  # every relation it restated was one it had written, of an entity it knew
