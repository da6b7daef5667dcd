"""The `GraphStore` contract suite, part 2: typed and inferred edges, observations, sources, reads."""

from __future__ import annotations

import pytest

from readmodels.graph.identity import typed_label
from readmodels.graph.model import EntityRef, InvalidGraphWrite, Provenance, RelationAssertion
from readmodels.graph.protocol import GraphStore, ReadOnlyQueryError
from tests import test_graph_support as support
from tests.test_graph_support import (
    HASH_A,
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
        assert await count(graph_store, f"(a:EntityKey)-[r:{label}]->(b:EntityKey)") == await count(
            graph_store,
            "(a:EntityKey)-[r:RELATES]->(b:EntityKey)",
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
    assert await count(graph_store, "(a:EntityKey)-[r:REL_RELATES]->(b:EntityKey)") == 1
    assert await count(graph_store, "(a:EntityKey)-[r:REL_HAS_EVENT]->(b:EntityKey)") == 1
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
        "(a:EntityKey)-[r:RELATES]->(b:EntityKey)",
        "(a:EntityKey)-[r:AFFECTED_BY]->(b:EntityKey)",
        "(a:Event)-[r:PROJECTED_RELATION]->(b:EntityKey)",
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
    assert await count(graph_store, "(a:EntityKey)-[r:RELATES]->(b:EntityKey)") == 3


async def test_causal_edges_are_proposed_and_non_authoritative(graph_store: GraphStore) -> None:
    log = SessionLog()
    edit = log.add("file.edit.applied", {"path": "eventloom/ledger/mirror.py", "summary": "fsync the tail"})
    log.add(
        "causal.edge.generated",
        {
            "cause": "edit mirror.py",
            "effect": "crash test passes",
            "taxonomy": "fixed",
            "relation_type": "causal_fixed",
            "confidence": 0.81,
            "method": "command_failure_then_fix",
            "evidence": [{"event_seq": edit.seq, "event_hash": edit.hash}],
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
            graph_store, "(a:EntityKey)-[r:CAUSAL_FIXED]->(b:EntityKey)", "WHERE r.review_status = 'proposed'"
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
