"""`NameCache`: complete key sets per name, kept current from committed plans, evicted least recent first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.identity import entity_key, name_key
from readmodels.graph.name_cache import NameCache
from readmodels.graph.plan import EntityRow, WritePlan
from tests.test_graph_support import SessionLog, dump, project

pytestmark = pytest.mark.anyio


def created(session: str, name: str, entity_type: str) -> WritePlan:
    key = entity_key(session, name, entity_type)
    row = EntityRow(
        uid=f"{key}@1", key=key, session=session, name=name, entity_type=entity_type, summary=None,
        properties={}, valid_from="2025-01-01T00:00:00.000000Z", valid_to=None, version=1,
        source_event_seq=1, source_event_hash="h", source_event_type="t", source_thread=None,
    )  # fmt: skip
    plan = WritePlan()
    plan.new_entities.append(row)
    plan.new_keys.add(key)
    return plan


def test_known_names_are_complete_copies_kept_current_and_evicted_least_recent_first() -> None:
    auth, db, api = (name_key("s", name) for name in ("auth", "db", "api"))
    cache = NameCache(capacity=2)
    cache.remember({auth: set(), db: {"k1"}})
    known, missing = cache.split([auth, db, api])
    assert known == {auth: set(), db: {"k1"}} and missing == [api]
    known[db].add("changed")
    assert cache.split([db])[0] == {db: {"k1"}}
    plan = created("s", "auth", "service")
    cache.committed(plan)
    assert cache.split([auth])[0] == {auth: plan.new_keys}
    cache.remember({api: set()})
    assert cache.split([db]) == ({}, [db])  # capacity 2: the least recently used went first


def fact(**payload: Any) -> dict[str, Any]:
    return payload


async def test_a_store_that_remembers_names_writes_what_a_cold_one_writes(tmp_path: Path) -> None:
    log = SessionLog("s")
    log.add(
        "memory.fact.asserted",
        fact(relations=[{"source": "auth", "target": "team-a", "relation_type": "owned_by"}]),
    )
    log.add(
        "memory.fact.asserted", fact(entities=[{"name": "auth", "entity_type": "service", "summary": "v1"}])
    )
    log.add(
        "memory.fact.asserted", fact(relations=[{"source": "auth", "target": "db", "relation_type": "uses"}])
    )
    log.add(
        "memory.fact.asserted", fact(entities=[{"name": "db", "entity_type": "database", "summary": "pg"}])
    )
    log.add(
        "memory.fact.asserted", fact(relations=[{"source": "api", "target": "db", "relation_type": "reads"}])
    )
    async with LadybugGraphStore(tmp_path / "warm" / "graph.lbug") as warm:
        for event in log.events:
            await project(warm, [event], batch=1)
        remembered = await dump(warm, "s")
    for event in log.events:  # a fresh store, remembering nothing, per batch
        async with LadybugGraphStore(tmp_path / "cold" / "graph.lbug") as cold:
            await project(cold, [event], batch=1)
            read_every_time = await dump(cold, "s")
    assert remembered == read_every_time
    uses = {edge["a"] for edge in remembered["edges"] if edge["type"] == "uses"}
    assert uses == {entity_key("s", "auth", "service")}  # the typed entity, not a placeholder
