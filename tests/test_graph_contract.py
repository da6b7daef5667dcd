"""The `GraphStore` contract suite, part 1: the spine, entity versions, exactly-once batches.

Every backend must pass it unchanged (`graph_store` is parametrized by backend, see
tests/test_graph_support.py). The tests drive the store through real events and the real extraction,
and read back through the typed reads and portable Cypher only. Part 2: tests/test_graph_contract_links.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from projectors.graph.registry import extract
from readmodels.graph.identity import entity_key
from readmodels.graph.protocol import GraphStore
from tests import test_graph_support as support
from tests.test_graph_support import (
    FreshStore,
    SessionLog,
    count,
    dump,
    fact,
    project,
    ts,
    work_story,
)

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store


# -- spine ---------------------------------------------------------------------------------------------


async def test_spine_links_every_event_in_order(graph_store: GraphStore) -> None:
    assert isinstance(graph_store, GraphStore)
    log = work_story()
    assert await project(graph_store, log.events) == len(log.events)
    events = await graph_store.events("s1")
    assert [e.seq for e in events] == list(range(1, len(log.events) + 1))
    assert [e.hash for e in events] == [e.hash for e in log.events]
    assert [e.prev_hash for e in events] == [e.prev_hash for e in log.events]
    assert events[0].citation == log.events[0].citation
    assert events[2].summary == "task task-17 proposed: Repair torn lines"
    n = len(log.events)
    assert await count(graph_store, "(s:Session)-[:HAS_EVENT]->(e:Event)") == n
    assert await count(graph_store, "(a:Event)-[:NEXT_EVENT]->(b:Event)", "WHERE b.seq = a.seq + 1") == n - 1
    assert (
        await count(graph_store, "(a:Event)-[:PREVIOUS_EVENT]->(b:Event)", "WHERE b.seq = a.seq - 1") == n - 1
    )
    rows = await graph_store.query(
        "MATCH (s:Session) WHERE s.id = 's1' RETURN s.last_seq AS last, s.event_count AS n, s.last_hash AS h"
    )
    assert rows == [{"last": n, "n": n, "h": log.events[-1].hash}]
    assert len(await graph_store.events("s1", from_seq=4, limit=2)) == 2


# -- versions ------------------------------------------------------------------------------------------


async def test_changed_reassertion_opens_a_new_version_linked_both_ways(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("memory.fact.asserted", fact(("ledger mirror", "component", "Writes JSONL.")))
    log.add("memory.fact.asserted", fact(("ledger mirror", "component", "Writes verified JSONL.")))
    await project(graph_store, log.events)
    old, new = await graph_store.entity_versions("s1", "ledger mirror", "component")
    assert (old.summary, old.valid_from, old.valid_to, old.version) == ("Writes JSONL.", ts(1), ts(2), 1)
    assert (new.summary, new.valid_from, new.valid_to, new.version) == (
        "Writes verified JSONL.",
        ts(2),
        None,
        2,
    )
    assert (new.source_event_seq, new.source_event_hash) == (2, log.events[1].hash)
    assert new.source_event_type == "memory.fact.asserted"
    link = "WHERE a.uid = $old AND b.uid = $new"
    uids = {"old": old.uid, "new": new.uid}
    assert await count(graph_store, "(a:Entity)-[:SUPERSEDED_BY]->(b:Entity)", link, uids) == 1
    assert await count(graph_store, "(b:Entity)-[:PREVIOUS_VERSION]->(a:Entity)", link, uids) == 1
    assert [e.uid for e in await graph_store.entities("s1")] == [new.uid]


async def test_unchanged_reassertion_changes_nothing(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("memory.fact.asserted", fact(("NATS", "service", "The bus.")))
    await project(graph_store, log.events)
    before = await dump(graph_store, "s1")
    log.add("memory.fact.asserted", fact(("NATS", "service", "The bus.")))
    log.add("memory.fact.asserted", fact(("NATS", "service", None)))  # no summary: keeps the current one
    assert await project(graph_store, log.events) == 2
    after = await dump(graph_store, "s1")
    assert after["entities"] == before["entities"]
    assert after["version_links"] == before["version_links"] == 0
    assert await graph_store.applied_seqs("graph", ["s1"]) == {"s1": 3}


async def test_invalidation_closes_the_window_and_deletes_nothing(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "memory.fact.asserted",
        fact(
            ("mirror", "component", None),
            ("NATS", "service", None),
            relations=[("mirror", "consumes_from", "NATS")],
        ),
    )
    log.add(
        "memory.invalidated",
        {"entity": {"name": "mirror", "entity_type": "component"}, "invalid_at": "2025-05-01T09:00:05.5Z"},
    )
    await project(graph_store, log.events)
    (version,) = await graph_store.entity_versions("s1", "mirror", "component")
    assert version.valid_to == "2025-05-01T09:00:05.500000Z"
    assert {e.name for e in await graph_store.entities("s1")} == {"NATS"}
    assert {e.name for e in await graph_store.entities("s1", as_of=ts(3))} == {"mirror", "NATS"}
    assert await graph_store.relations("s1") == []
    (edge,) = await graph_store.relations("s1", as_of=ts(3))
    assert edge.valid_to == "2025-05-01T09:00:05.500000Z"
    assert await count(graph_store, "(e:Entity)") == 2

    log.add("memory.fact.asserted", fact(("mirror", "component", "Back again.")))
    await project(graph_store, log.events)
    first, second = await graph_store.entity_versions("s1", "mirror", "component")
    # a version never opens before the one it follows closed: here at invalid_at, not at the event's ts(3)
    assert (second.valid_from, second.valid_to, second.version) == ("2025-05-01T09:00:05.500000Z", None, 2)
    assert (
        await count(
            graph_store, "(a:Entity)-[:SUPERSEDED_BY]->(b:Entity)", "WHERE a.uid = $u", {"u": first.uid}
        )
        == 1
    )


async def test_relation_invalidation_closes_only_that_relation(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "memory.fact.asserted",
        fact(relations=[("mirror", "consumes_from", "NATS"), ("mirror", "writes", "ledger")]),
    )
    log.add(
        "memory.invalidated",
        {
            "relation": {"source": "mirror", "target": "NATS", "relation_type": "consumes_from"},
            "invalid_at": ts(2),
            "reason": "reads the ledger bus now",
        },
    )
    await project(graph_store, log.events)
    assert [(r.relation_type, r.target_name) for r in await graph_store.relations("s1")] == [
        ("writes", "ledger")
    ]
    assert len(await graph_store.relations("s1", as_of=ts(1.5))) == 2
    assert {e.name for e in await graph_store.entities("s1")} == {"mirror", "NATS", "ledger"}


async def test_a_relation_reasserted_unchanged_or_changed(graph_store: GraphStore) -> None:
    def uses(**properties: object) -> dict[str, Any]:
        relation = {"source": "api", "target": "db", "relation_type": "uses", "properties": properties}
        return {"entities": [], "relations": [relation]}

    log = SessionLog()
    log.add("memory.fact.asserted", uses(pool=5))
    log.add("memory.fact.asserted", uses(pool=5))
    log.add("memory.fact.asserted", uses(pool=10))
    await project(graph_store, log.events, batch=1)
    (current,) = await graph_store.relations("s1")
    assert (current.properties, current.valid_from, current.source_event_seq) == ({"pool": 10}, ts(3), 3)
    (first,) = await graph_store.relations("s1", as_of=ts(2.5))
    assert (first.properties, first.valid_to, first.source_event_seq) == ({"pool": 5}, ts(3), 1)
    assert await count(graph_store, "(a:EntityKey)-[r:USES]->(b:EntityKey)") == 2
    actions = await graph_store.query(
        "MATCH (v:Event)-[p:PROJECTED_RELATION]->(e:EntityKey) "
        "RETURN v.seq AS seq, p.action AS action ORDER BY seq"
    )
    assert actions == [
        {"seq": 1, "action": "created"},
        {"seq": 2, "action": "unchanged"},
        {"seq": 3, "action": "superseded"},
    ]


async def test_a_relation_joins_entities_and_outlives_their_versions(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "memory.fact.asserted",
        fact(("api", "service", "v1"), ("db", "database", "pg"), relations=[("api", "depends_on", "db")]),
    )
    log.add("memory.fact.asserted", fact(("api", "service", "v2")))
    log.add("memory.fact.asserted", fact(("db", "database", "pg 17")))
    await project(graph_store, log.events)
    (current,) = await graph_store.relations("s1")
    db = await graph_store.entity_versions("s1", "db", "database")
    assert (current.source_key, current.target_key) == (
        entity_key("s1", "api", "service"),
        entity_key("s1", "db", "database"),
    )
    assert (current.valid_from, current.valid_to, current.source_event_seq) == (ts(1), None, 1)
    for instant in (1.5, 2.5):  # one edge, whichever versions hold: revising an end copies nothing
        assert [edge.uid for edge in await graph_store.relations("s1", as_of=ts(instant))] == [current.uid]
    assert await count(graph_store, "(a:EntityKey)-[r:DEPENDS_ON]->(b:EntityKey)") == 1
    # a neighbour comes as the version that held then
    for as_of, version in ((ts(1.5), db[0]), (ts(2.5), db[0]), (None, db[1])):
        (near,) = await graph_store.neighbours("s1", "api", "service", as_of=as_of)
        assert (near.entity.uid, near.entity.summary, near.via.uid) == (
            version.uid,
            version.summary,
            current.uid,
        )


async def test_as_of_reads_follow_validity_windows(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("user.preference_changed", {"key": "line_length", "value": 88})
    log.add("user.preference_changed", {"key": "line_length", "value": 110, "previous": 88})
    log.add(
        "memory.invalidated",
        {"entity": {"name": "line_length", "entity_type": "preference"}, "invalid_at": ts(3)},
    )
    await project(graph_store, log.events)

    async def value(at: str | None) -> object:
        found = await graph_store.entities("s1", as_of=at, entity_type="preference")
        return found[0].properties["value"] if found else None

    assert await value(ts(0.5)) is None
    assert await value(ts(1)) == 88
    assert await value(ts(1.999999)) == 88
    assert await value(ts(2)) == 110
    assert await value("2025-05-01T11:00:02.5+02:00") == 110
    assert await value(ts(3)) is None
    assert await value(None) is None


# -- exactly once ----------------------------------------------------------------------------------------


async def test_applying_a_batch_twice_changes_nothing(graph_store: GraphStore) -> None:
    log = work_story()
    batch = [extract(event) for event in log.events]
    assert await graph_store.apply("graph", batch) == len(batch)
    before = await dump(graph_store, "s1")
    assert await graph_store.apply("graph", batch) == 0
    assert await graph_store.apply("graph", batch[3:6]) == 0
    assert await dump(graph_store, "s1") == before
    assert await graph_store.applied_seqs("graph", ["s1", "other"]) == {"s1": len(batch)}
    assert await graph_store.applied_seqs("another-projector", ["s1"]) == {}


async def test_an_overlapping_batch_applies_only_what_is_new(graph_store: GraphStore) -> None:
    log = work_story()
    await project(graph_store, log.events[:5])
    assert await project(graph_store, log.events[2:]) == len(log.events) - 5
    assert [e.seq for e in await graph_store.events("s1")] == list(range(1, len(log.events) + 1))


async def test_batch_boundaries_do_not_change_the_graph(fresh_store: FreshStore, tmp_path: Path) -> None:
    log = work_story()
    log.add(
        "memory.fact.asserted", fact(("task-17", "task", "renamed"), relations=[("task-17", "relates", "x")])
    )
    log.add(
        "inference.edge.generated",
        {
            "source": "task-17",
            "target": "dec-9",
            "relation_type": "likely_implemented_decision",
            "confidence": 0.86,
            "method": "m",
            "edge_id": "e1",
        },
    )
    log.add("inference.edge.retracted", {"edge_id": "e1", "reason": "no"})
    dumps = []
    for size in (1, 4, 1000):
        async with fresh_store(tmp_path / f"b{size}") as store:
            await project(store, log.events, batch=size)
            dumps.append(await dump(store, "s1"))
    assert dumps[0] == dumps[1] == dumps[2]
