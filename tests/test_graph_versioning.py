"""The backend-neutral resolution rules (`readmodels.graph.versioning`), without any database."""

from __future__ import annotations

import pytest

from readmodels.graph.identity import entity_key, entity_uid, name_key
from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EntityRef,
    EventProjection,
    GraphOp,
    InvalidGraphWrite,
    Provenance,
    RelationAssertion,
    SourceCitation,
    SpineEvent,
    TaskObservation,
    canonical_ts,
    ts_after,
)
from readmodels.graph.plan import EntityRow, Snapshot, WritePlan
from readmodels.graph.versioning import Resolver, load_request
from tests.test_graph_support import ts


def at(seq: int, *ops: GraphOp, when: str | None = None) -> EventProjection:
    spine = SpineEvent(
        session="s1",
        seq=seq,
        hash=f"{seq:064x}",
        prev_hash=None,
        type="t.x",
        ts=when or ts(seq),
        actor="a",
        summary="",
    )
    return EventProjection(event=spine, ops=ops)


def prov(seq: int) -> Provenance:
    return Provenance(event_seq=seq, event_hash=f"{seq:064x}", event_type="t.x")


def entity(
    seq: int, name: str, summary: str | None, kind: str = "service", start: str | None = None, **props: object
) -> EntityAssertion:
    return EntityAssertion(
        name=name,
        entity_type=kind,
        summary=summary,
        properties=dict(props),
        provenance=prov(seq),
        valid_from=start or ts(seq),
    )


def relation(
    seq: int, source: EntityRef, target: EntityRef, kind: str = "uses", start: str | None = None
) -> RelationAssertion:
    return RelationAssertion(
        source=source, target=target, relation_type=kind, provenance=prov(seq), valid_from=start or ts(seq)
    )


def existing(
    name: str, kind: str, start: str, end: str | None = None, summary: str | None = None
) -> EntityRow:
    key = entity_key("s1", name, kind)
    return EntityRow(
        uid=entity_uid(key, start),
        key=key,
        session="s1",
        name=name,
        entity_type=kind,
        summary=summary,
        properties={},
        valid_from=start,
        valid_to=end,
        version=1,
        source_event_seq=1,
        source_event_hash="0" * 64,
        source_event_type="t.x",
        source_thread=None,
    )


def resolve(*projections: EventProjection, snapshot: Snapshot | None = None) -> WritePlan:
    return Resolver(snapshot or Snapshot()).resolve(projections)


def test_a_later_statement_of_the_same_event_updates_its_own_version() -> None:
    plan = resolve(at(1, entity(1, "api", "one"), entity(1, "api", "two")))
    (row,) = plan.new_entities
    assert (row.summary, row.version) == ("two", 1)
    assert [action for _, _, action in plan.projected_entities] == ["created", "updated"]


def test_properties_merge_and_none_removes_a_key() -> None:
    plan = resolve(
        at(1, entity(1, "api", "s", port=80, host="a")),
        at(2, entity(2, "api", None, port=81)),
        at(3, entity(3, "api", None, host=None)),
        at(4, entity(4, "api", None, port=81)),
    )
    assert [(r.version, r.properties, r.summary) for r in plan.new_entities] == [
        (1, {"port": 80, "host": "a"}, "s"),
        (2, {"port": 81, "host": "a"}, "s"),
        (3, {"port": 81}, "s"),
    ]
    assert plan.projected_entities[-1][2] == "unchanged"


def test_a_version_never_starts_before_the_one_it_follows() -> None:
    plan = resolve(
        at(1, entity(1, "api", "one", start=ts(10))),
        at(2, entity(2, "api", "two", start=ts(10))),
        at(3, entity(3, "api", "three", start=ts(5))),
    )
    starts = [r.valid_from for r in plan.new_entities]
    assert starts == [ts(10), ts_after(ts(10)), ts_after(ts_after(ts(10)))]
    assert [r.valid_to for r in plan.new_entities] == [starts[1], starts[2], None]
    assert len({r.uid for r in plan.new_entities}) == 3


def test_an_untyped_end_prefers_an_open_typed_entity() -> None:
    snapshot = Snapshot(
        heads={
            entity_key("s1", "nats", "service"): existing("nats", "service", ts(1)),
            entity_key("s1", "nats", "library"): existing("nats", "library", ts(2), end=ts(3)),
            entity_key("s1", "nats", "entity"): existing("nats", "entity", ts(4)),
        },
        names={
            name_key("s1", "nats"): {
                entity_key("s1", "nats", "service"),
                entity_key("s1", "nats", "library"),
                entity_key("s1", "nats", "entity"),
            }
        },
    )
    plan = resolve(at(5, relation(5, EntityRef("api", "service"), EntityRef("nats"))), snapshot=snapshot)
    (edge,) = plan.new_relations
    assert edge.target_key == entity_key("s1", "nats", "service")
    assert [(r.name, r.entity_type) for r in plan.new_entities] == [("api", "service")]


def test_an_unknown_untyped_end_becomes_a_placeholder_entity() -> None:
    plan = resolve(at(1, relation(1, EntityRef("a"), EntityRef("b"))))
    assert {(r.name, r.entity_type) for r in plan.new_entities} == {("a", "entity"), ("b", "entity")}


def test_an_edge_joins_entities_and_a_new_version_leaves_it_as_it_is() -> None:
    snapshot = Snapshot(
        heads={entity_key("s1", "api", "service"): existing("api", "service", ts(1), summary="v1")}
    )
    plan = resolve(
        at(2, relation(2, EntityRef("api", "service"), EntityRef("db", "database")), entity(2, "api", "v2")),
        snapshot=snapshot,
    )
    (edge,) = plan.new_relations
    assert (edge.source_key, edge.valid_to) == (entity_key("s1", "api", "service"), None)
    assert plan.closed_relations == []  # nothing to close, nothing to copy


def test_an_edge_starts_no_earlier_than_its_ends() -> None:
    plan = resolve(
        at(1, entity(1, "a", "x", start=ts(5))),
        at(2, relation(2, EntityRef("a", "service"), EntityRef("b", "service"), start=ts(1))),
    )
    (edge,) = plan.new_relations
    assert edge.valid_from == ts(5)


def test_retraction_only_closes_inferred_edges() -> None:
    inferred = RelationAssertion(
        source=EntityRef("a", "x"),
        target=EntityRef("b", "x"),
        relation_type="uses",
        provenance=prov(1),
        valid_from=ts(1),
        inferred=True,
        confidence=0.5,
        inference_method="m",
        edge_id="e1",
    )
    asserted = relation(1, EntityRef("a", "x"), EntityRef("b", "x"))
    retract = EdgeRetraction(
        source="a", target="b", relation_type="uses", retracted_at=ts(2), provenance=prov(2)
    )
    plan = resolve(at(1, inferred, asserted), at(2, retract))
    assert sorted((e.inferred, e.valid_to) for e in plan.new_relations) == [(False, None), (True, ts(2))]


def test_invalidation_clamps_to_the_window_start() -> None:
    plan = resolve(
        at(1, entity(1, "a", "x", start=ts(5))),
        at(2, EntityInvalidation(name="a", entity_type="service", invalid_at=ts(2), provenance=prov(2))),
    )
    (row,) = plan.new_entities
    assert (row.valid_from, row.valid_to) == (ts(5), ts(5))


def test_load_request_names_everything_the_batch_touches() -> None:
    projections = [
        at(1, entity(1, "a", None), relation(1, EntityRef("a", "service"), EntityRef("b"))),
        at(2, EdgeRetraction(edge_id="e9", retracted_at=ts(2), provenance=prov(2))),
        at(3, TaskObservation(task_id="t1", kind="OBSERVED_COMMAND", provenance=prov(3))),
        at(4, SourceCitation(path="p", provenance=prov(4), cited_by=EntityRef("doc", "document"))),
    ]
    request = load_request(projections)
    assert set(request.entity_keys) == {
        entity_key("s1", "a", "service"),
        entity_key("s1", "t1", "task"),
        entity_key("s1", "doc", "document"),
    }
    assert request.name_keys == [name_key("s1", "b")]
    assert request.edge_ids == [("s1", "e9")]
    assert request.sessions == ["s1"]


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("2025-05-01T09:30:00Z", "2025-05-01T09:30:00.000000Z"),
        ("2025-05-01t09:30:00.5z", "2025-05-01T09:30:00.500000Z"),
        ("2025-05-01T11:30:00.123456789+02:00", "2025-05-01T09:30:00.123456Z"),
        ("2025-05-01T00:30:00-01:00", "2025-05-01T01:30:00.000000Z"),
    ],
)
def test_timestamps_are_canonical_utc_microseconds(raw: str, canonical: str) -> None:
    assert canonical_ts(raw) == canonical


@pytest.mark.parametrize("bad", ["2025-05-01", "2025-13-01T00:00:00Z", "yesterday", "2025-05-01T09:30:00"])
def test_bad_timestamps_are_refused(bad: str) -> None:
    with pytest.raises(InvalidGraphWrite):
        canonical_ts(bad)


def test_the_first_pass_names_only_the_stored_edges_it_needs() -> None:
    agent = existing("claude", "agent", ts(1))
    task = existing("task-1", "task", ts(1), summary="old")
    snapshot = Snapshot(
        heads={agent.key: agent, task.key: task},
        names={name_key("s1", "claude"): {agent.key}},
    )
    resolver = Resolver(snapshot)
    resolver.resolve(
        [
            at(
                2, relation(2, EntityRef("task-9", "task"), EntityRef("claude"))
            ),  # a new task: nothing stored
            at(3, relation(3, EntityRef("claude", "agent"), EntityRef("x", "tool"))),  # may exist: by key
            at(
                4, entity(4, "task-1", "new", kind="task")
            ),  # a new version: its entity's edges stay as they are
        ]
    )
    demands = resolver.demands
    assert demands.entities == set()  # only an invalidation reads every open edge of an entity
    assert {entity for entity, _ in demands.keys} == {agent.key}  # never the agent's whole neighbourhood
    assert demands.triples == set()
    assert agent.valid_to is None and task.valid_to is None  # the snapshot itself is left untouched
