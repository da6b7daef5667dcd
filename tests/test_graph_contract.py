"""The `GraphStore` contract suite: every backend must pass it unchanged.

`graph_store` is parametrized by backend (only "ladybug" today; Neo4j joins by adding itself to
`BACKENDS` and `make_store`). The tests drive the store through real events and the real extraction, and
read back through the typed reads and portable Cypher only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from eventloom.event import Event
from projectors.graph.extract import extract
from readmodels.graph.identity import typed_label
from readmodels.graph.ladybug import LadybugGraphStore
from readmodels.graph.model import EntityRef, InvalidGraphWrite, Provenance, RelationAssertion
from readmodels.graph.protocol import GraphStore, ReadOnlyQueryError
from tests.test_graph_support import SessionLog, count, dump, ts

pytestmark = pytest.mark.anyio

BACKENDS = ["ladybug"]
HASH_A = "3f79bb7b435b05321651daefd374cdc681dc06faa65e374e38337b88ca046dea"


def make_store(backend: str, root: Path) -> GraphStore:
    if backend == "ladybug":
        return LadybugGraphStore(root / "graph.lbug")
    raise ValueError(f"unknown graph backend {backend!r}")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def graph_store(backend: str, tmp_path: Path) -> AsyncIterator[GraphStore]:
    store = make_store(backend, tmp_path / "store")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def project(store: GraphStore, events: Sequence[Event], batch: int = 500, name: str = "graph") -> int:
    applied = 0
    for start in range(0, len(events), batch):
        applied += await store.apply(name, [extract(event) for event in events[start : start + batch]])
    return applied


def fact(*entities: tuple[str, str, str | None], relations: Sequence[tuple[str, str, str]] = ()) -> dict[str, Any]:
    return {
        "entities": [
            {"name": name, "entity_type": kind, **({"summary": summary} if summary is not None else {})}
            for name, kind, summary in entities
        ],
        "relations": [{"source": s, "target": t, "relation_type": r} for s, r, t in relations],
    }


def work_story() -> SessionLog:
    log = SessionLog("s1")
    log.add("session.started", {"agent": "claude-code", "goal": "Make the ledger durable"})
    log.add("goal.created", {"goal_id": "goal-1", "title": "Never lose an acknowledged event"})
    log.add("task.proposed", {"task_id": "task-17", "title": "Repair torn lines", "goal_id": "goal-1"})
    log.add("task.claimed", {"task_id": "task-17", "assignee": "claude-code"})
    log.add("decision.made", {"decision_id": "dec-9", "title": "Truncate and re-fetch", "task_id": "task-17"})
    log.add("command.completed", {"command": "pytest -q", "exit_code": 1, "taskId": "task-17"})
    log.add(
        "file.edit.applied",
        {
            "path": "eventloom/ledger/mirror.py",
            "line_start": 88,
            "line_end": 93,
            "checksum": "sha256:abc",
            "task_id": "task-17",
        },
    )
    log.add("command.completed", {"command": "pytest -q", "exit_code": 0})
    log.add("task.completed", {"task_id": "task-17", "summary": "Torn tails repaired"})
    return log


# -- spine ---------------------------------------------------------------------------------------------


async def test_spine_links_every_event_in_order(graph_store: GraphStore) -> None:
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
    assert await count(graph_store, "(a:Entity)-[r:USES]->(b:Entity)") == 2
    actions = await graph_store.query(
        "MATCH (v:Event)-[p:PROJECTED_RELATION]->(e:Entity) "
        "RETURN v.seq AS seq, p.action AS action ORDER BY seq"
    )
    assert actions == [
        {"seq": 1, "action": "created"},
        {"seq": 2, "action": "unchanged"},
        {"seq": 3, "action": "superseded"},
    ]


async def test_relations_carry_forward_to_the_new_version(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "memory.fact.asserted",
        fact(("api", "service", "v1"), ("db", "database", "pg"), relations=[("api", "depends_on", "db")]),
    )
    log.add("memory.fact.asserted", fact(("api", "service", "v2")))
    log.add("memory.fact.asserted", fact(("db", "database", "pg 17")))
    await project(graph_store, log.events)
    (current,) = await graph_store.relations("s1")
    api = await graph_store.entity_versions("s1", "api", "service")
    db = await graph_store.entity_versions("s1", "db", "database")
    assert (current.source_uid, current.target_uid) == (api[1].uid, db[1].uid)
    assert current.valid_from == ts(3) and current.carried_by_event_seq == 3
    assert current.source_event_seq == 1  # provenance of the fact is kept
    (at_1,) = await graph_store.relations("s1", as_of=ts(1.5))
    (at_2,) = await graph_store.relations("s1", as_of=ts(2.5))
    assert (at_1.source_uid, at_1.target_uid, at_1.valid_to) == (api[0].uid, db[0].uid, ts(2))
    assert (at_2.source_uid, at_2.target_uid, at_2.carried_from) == (api[1].uid, db[0].uid, at_1.uid)
    assert current.carried_from == at_2.uid
    assert await count(graph_store, "(a:Entity)-[r:DEPENDS_ON]->(b:Entity)") == 3
    assert await count(graph_store, "(a:Entity)-[r:DEPENDS_ON]->(b:Entity)", "WHERE r.valid_to IS NULL") == 1


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


async def test_batch_boundaries_do_not_change_the_graph(backend: str, tmp_path: Path) -> None:
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
        store = make_store(backend, tmp_path / f"b{size}")
        await store.open()
        try:
            await project(store, log.events, batch=size)
            dumps.append(await dump(store, "s1"))
        finally:
            await store.close()
    assert dumps[0] == dumps[1] == dumps[2]


# -- typed edges, audit fields ---------------------------------------------------------------------------


async def test_every_relation_is_written_twice_generic_and_typed(graph_store: GraphStore) -> None:
    await project(graph_store, work_story().events)
    pairs = {(r.relation_type, r.source_name, r.target_name) for r in await graph_store.relations("s1")}
    assert pairs == {
        ("part_of", "task-17", "goal-1"),
        ("assigned_to", "task-17", "claude-code"),
        ("decided_for", "dec-9", "task-17"),
    }
    for relation_type, *_ in pairs:
        label = typed_label(relation_type)
        assert await count(graph_store, f"(a:Entity)-[r:{label}]->(b:Entity)") == await count(
            graph_store,
            "(a:Entity)-[r:RELATES]->(b:Entity)",
            "WHERE r.relation_type = $t",
            {"t": relation_type},
        )


@pytest.mark.parametrize(
    "bad", ["DependsOn", "depends-on", "1st", "", "x]->(b) DETACH DELETE b //", "a" * 129, "depends on"]
)
def test_relation_types_must_be_strict_snake_case(bad: str) -> None:
    provenance = Provenance(event_seq=1, event_hash=HASH_A, event_type="memory.fact.asserted")
    with pytest.raises(InvalidGraphWrite):
        RelationAssertion(
            source=EntityRef("a"),
            target=EntityRef("b"),
            relation_type=bad,
            provenance=provenance,
            valid_from=ts(1),
        )
    with pytest.raises(InvalidGraphWrite):
        typed_label(bad)


async def test_reserved_and_hostile_relation_types_stay_harmless(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("memory.fact.asserted", fact(relations=[("a", "relates", "b"), ("a", "has_event", "b")]))
    hostile = {
        "source": "a",
        "target": "b",
        "relation_type": "x]->(b) DETACH DELETE b //",
        "confidence": 0.5,
        "method": "m",
    }
    log.add("inference.edge.generated", hostile)  # built without validation, as a newer producer might
    await project(graph_store, log.events)
    assert await count(graph_store, "(a:Entity)-[r:REL_RELATES]->(b:Entity)") == 1
    assert await count(graph_store, "(a:Entity)-[r:REL_HAS_EVENT]->(b:Entity)") == 1
    assert await count(graph_store, "(s:Session)-[r:HAS_EVENT]->(e:Event)") == 2
    generic = await graph_store.entities("s1", entity_type="event")
    assert [e.name for e in generic] == ["inference.edge.generated#2"]
    assert "relation_type" in generic[0].properties["invalid_payload"]
    assert await count(graph_store, "(e:Entity)") == 3  # a, b and the generic event entity: nothing deleted


async def test_inferred_edges_carry_their_audit_fields_everywhere(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("issue.diagnosed", {"issue_id": "issue-4", "summary": "Verification fails after kill -9"})
    log.add(
        "inference.edge.generated",
        {
            "edge_id": "inf-7",
            "source": "ledger mirror",
            "target": "issue-4",
            "relation_type": "affected_by",
            "confidence": 0.74,
            "method": "co_occurrence",
            "source_event_seq": 1,
            "source_event_hash": HASH_A,
            "evidence": [
                {"event_seq": 1, "event_hash": HASH_A, "quote": "fails after kill -9"},
                {"citation": "eventloom://s1/events/1#3f79bb7b435b"},
            ],
        },
    )
    await project(graph_store, log.events)
    (edge,) = await graph_store.relations("s1")
    assert (edge.inferred, edge.confidence, edge.inference_method, edge.edge_id) == (
        True,
        0.74,
        "co_occurrence",
        "inf-7",
    )
    assert edge.evidence_event_hashes == [HASH_A] and edge.evidence_event_seqs == [1]
    assert edge.evidence_quotes == ["fails after kill -9"]
    assert edge.evidence_citations == ["eventloom://s1/events/1#3f79bb7b435b"]
    assert (edge.derived_from_event_seq, edge.derived_from_event_hash) == (1, HASH_A)
    assert edge.target_entity_type == "issue"  # an untyped end resolves to the known entity of that name
    assert await graph_store.relations("s1", include_inferred=False) == []
    columns = "r.inferred AS inferred, r.confidence AS confidence, r.inference_method AS method, "
    columns += "r.edge_id AS edge_id"
    expected = [{"inferred": True, "confidence": 0.74, "method": "co_occurrence", "edge_id": "inf-7"}]
    for pattern in (
        "(a:Entity)-[r:RELATES]->(b:Entity)",
        "(a:Entity)-[r:AFFECTED_BY]->(b:Entity)",
        "(a:Event)-[r:PROJECTED_RELATION]->(b:Entity)",
    ):
        assert await graph_store.query(f"MATCH {pattern} RETURN {columns}") == expected


async def test_retraction_closes_the_inferred_edge_and_deletes_nothing(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "inference.edge.generated",
        {
            "edge_id": "inf-7",
            "source": "mirror",
            "target": "issue-4",
            "relation_type": "affected_by",
            "confidence": 0.7,
            "method": "m",
        },
    )
    log.add(
        "inference.edge.generated",
        {"source": "mirror", "target": "nats", "relation_type": "uses", "confidence": 0.6, "method": "m"},
    )
    log.add("memory.fact.asserted", fact(relations=[("mirror", "uses", "nats")]))
    log.add("inference.edge.retracted", {"edge_id": "inf-7", "reason": "coincidence"})
    log.add(
        "inference.edge.retracted",
        {"source": "mirror", "target": "nats", "relation_type": "uses", "reason": "no"},
    )
    await project(graph_store, log.events)
    current = await graph_store.relations("s1")
    assert [(r.relation_type, r.inferred) for r in current] == [("uses", False)]  # asserted edges survive
    windows = {
        (r.relation_type, r.inferred): r.valid_to for r in await graph_store.relations("s1", as_of=ts(3))
    }
    assert windows == {("affected_by", True): ts(4), ("uses", True): ts(5), ("uses", False): None}
    assert await count(graph_store, "(a:Entity)-[r:RELATES]->(b:Entity)") == 3


async def test_causal_edges_are_proposed_and_non_authoritative(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "causal.edge.generated",
        {
            "cause": "edit mirror.py",
            "effect": "crash test passes",
            "taxonomy": "fixed",
            "relation_type": "causal_fixed",
            "confidence": 0.81,
            "method": "command_failure_then_fix",
            "evidence": [{"event_seq": 1}],
        },
    )
    await project(graph_store, log.events)
    (edge,) = await graph_store.relations("s1", relation_type="causal_fixed")
    assert (edge.review_status, edge.authority_status, edge.inferred) == (
        "proposed",
        "non_authoritative",
        True,
    )
    assert (edge.source_entity_type, edge.target_entity_type) == ("cause", "outcome")
    assert (
        await count(
            graph_store, "(a:Entity)-[r:CAUSAL_FIXED]->(b:Entity)", "WHERE r.review_status = 'proposed'"
        )
        == 1
    )


# -- observations, sources -------------------------------------------------------------------------------


async def test_task_observations_need_an_explicit_task_id(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add("task.proposed", {"task_id": "task-17", "title": "Repair torn lines"})
    log.add("command.completed", {"command": "pytest", "exit_code": 0, "task_id": "task-17"})
    log.add("command.completed", {"command": "pytest", "exit_code": 0})
    log.add("file.edit.applied", {"path": "a.py", "taskId": "task-17"})
    log.add("file.edit.applied", {"path": "a.py"})
    log.add("tool.call.completed", {"tool": "Edit", "ok": True, "taskId": "task-17"})
    log.add("tool.call.completed", {"tool": "Edit", "ok": True})
    log.add("hook.checkpoint", {"name": "before-stop", "state": {"turn": 3}, "task_id": "task-17"})
    log.add("hook.checkpoint", {"name": "before-stop", "state": {"turn": 4}})
    log.add("decision.made", {"decision_id": "d1", "title": "t", "task_id": "task-17"})
    log.add("command.completed", {"command": "make", "exit_code": 2, "taskId": "task-99"})
    await project(graph_store, log.events)
    seen = [(o.kind, o.seq, o.event_type) for o in await graph_store.observations("s1", "task-17")]
    assert seen == [
        ("OBSERVED_COMMAND", 2, "command.completed"),
        ("OBSERVED_FILE_EDIT", 4, "file.edit.applied"),
        ("OBSERVED_TOOL_CALL", 6, "tool.call.completed"),
        ("HAS_CHECKPOINT", 8, "hook.checkpoint"),
    ]
    kinds = ("OBSERVED_COMMAND", "OBSERVED_FILE_EDIT", "OBSERVED_TOOL_CALL", "HAS_CHECKPOINT")
    assert sum([await count(graph_store, f"(t:Entity)-[o:{k}]->(e:Event)") for k in kinds]) == 5
    (other,) = await graph_store.observations("s1", "task-99")
    assert other.seq == 11  # the task entity was created for it
    assert [v.version for v in await graph_store.entity_versions("s1", "task-99", "task")] == [1]


async def test_sources_are_cited_by_events_and_entities_with_line_ranges(graph_store: GraphStore) -> None:
    log = SessionLog()
    log.add(
        "document.indexed",
        {
            "path": "docs/operations.md",
            "title": "Operations",
            "checksum": "sha256:2e7d",
            "content": "# Operations\n\nBack up daily.\nKeys live in <data>/keys.\n",
            "chunks": [
                {"text": "# Operations", "line_start": 1, "line_end": 1},
                {"text": "Back up daily.\nKeys live in <data>/keys.", "line_start": 3, "line_end": 4},
            ],
        },
    )
    log.add(
        "code.symbol.indexed",
        {
            "path": "mirror.py",
            "symbol": "repair_tail",
            "kind": "function",
            "line_start": 80,
            "line_end": 112,
            "checksum": "sha256:18ac",
        },
    )
    log.add(
        "file.edit.applied",
        {"path": "mirror.py", "line_start": 88, "line_end": 93, "checksum": "sha256:3e23"},
    )
    await project(graph_store, log.events)
    docs = await graph_store.sources("s1", path="docs/operations.md")
    ranges = {(c.line_start, c.line_end, c.text, c.entity_name) for c in docs}
    assert ranges == {
        (1, 4, "# Operations\n\nBack up daily.\nKeys live in <data>/keys.\n", None),
        (1, 4, "# Operations\n\nBack up daily.\nKeys live in <data>/keys.\n", "docs/operations.md"),
        (1, 1, "# Operations", None),
        (1, 1, "# Operations", "docs/operations.md"),
        (3, 4, "Back up daily.\nKeys live in <data>/keys.", None),
        (3, 4, "Back up daily.\nKeys live in <data>/keys.", "docs/operations.md"),
    }
    assert all(c.checksum == "sha256:2e7d" and c.cited_by_event_seq == 1 for c in docs)
    code = [
        (c.line_start, c.line_end, c.checksum, c.entity_type)
        for c in await graph_store.sources("s1", path="mirror.py")
    ]
    assert code == [
        (80, 112, "sha256:18ac", None),
        (80, 112, "sha256:18ac", "code_symbol"),
        (88, 93, "sha256:3e23", None),
        (88, 93, "sha256:3e23", "file"),
    ]
    assert await count(graph_store, "(s:Source)") == 5
    assert await count(graph_store, "(v:Event)-[c:CITES_SOURCE]->(s:Source)", "WHERE c.line_start = 80") == 1


# -- reads -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE (e:Entity {uid: 'x'})",
        "MATCH (e:Entity) SET e.name = 'x'",
        "MATCH (e:Entity) DETACH DELETE e",
        "MATCH (e:Event) DELETE e",
        "COMMIT; MATCH (e) DETACH DELETE e",
        "MATCH (e:Entity) RETURN e.name; CREATE (x:Entity {uid: 'y'})",
        "COMMIT",
        "ROLLBACK",
        "  ",
    ],
)
async def test_query_is_read_only(graph_store: GraphStore, statement: str) -> None:
    await project(graph_store, work_story().events)
    before = await dump(graph_store, "s1")
    with pytest.raises(ReadOnlyQueryError):
        await graph_store.query(statement)
    assert await dump(graph_store, "s1") == before


async def test_query_runs_parameterized_reads(graph_store: GraphStore) -> None:
    await project(graph_store, work_story().events)
    rows = await graph_store.query(
        "MATCH (e:Entity) WHERE e.entity_type = $t AND e.valid_to IS NULL "
        "RETURN e.name AS name; // one ; statement",
        {"t": "goal"},
    )
    assert rows == [{"name": "goal-1"}]


async def test_neighbours_traverse_current_edges_up_to_depth(graph_store: GraphStore) -> None:
    log = work_story()
    log.add(
        "inference.edge.generated",
        {
            "source": "goal-1",
            "target": "NATS",
            "relation_type": "relies_on",
            "confidence": 0.5,
            "method": "m",
        },
    )
    await project(graph_store, log.events)
    near = await graph_store.neighbours("s1", "task-17", "task")
    assert {(n.entity.name, n.depth, n.via.relation_type) for n in near} == {
        ("goal-1", 1, "part_of"),
        ("claude-code", 1, "assigned_to"),
        ("dec-9", 1, "decided_for"),
    }
    far = await graph_store.neighbours("s1", "dec-9", depth=3)
    assert [(n.entity.name, n.depth) for n in far] == [
        ("task-17", 1),
        ("claude-code", 2),
        ("goal-1", 2),
        ("NATS", 3),
    ]
    assert "NATS" not in {
        n.entity.name for n in await graph_store.neighbours("s1", "dec-9", depth=3, include_inferred=False)
    }
    assert await graph_store.neighbours("s1", "task-17", as_of=ts(0.5)) == []
