"""The workflow read model on a real Neo4j: its labels and relationship types, its schema, and its writes
(a batch written at once is what its events written one by one are; re-applying changes nothing; a failing
batch writes nothing; `clear` empties the model and only it). The answers are the contract suite's
(tests/test_workflow_contract.py), on both backends."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import pytest
from neo4j.exceptions import Neo4jError

from eventloom.event import Event
from eventloom.settings import Settings
from gateway.packs.workflow import events
from gateway.packs.workflow.model import (
    KIND_LABELS,
    NODE_LABELS,
    REL_TYPES,
    Cite,
    NodeRef,
    UpsertNode,
    WorkflowChanges,
)
from gateway.packs.workflow.neo4j_schema import LABELS, MIGRATIONS
from gateway.packs.workflow.neo4j_store import Neo4jWorkflowStore, neo4j_workflow_store
from gateway.packs.workflow.reads import PathQuestion, SequenceQuestion
from gateway.packs.workflow.translate import changes

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio
SESSION = "wf-neo4j"
MODEL_LABELS = "|".join(NODE_LABELS)
RUN = "run-neo4j-1"


def _event(seq: int, type: str, payload: dict[str, Any]) -> Event:
    digest = hashlib.sha256(f"{SESSION}/{seq}/{type}".encode()).hexdigest()
    return Event(
        v=1,
        session=SESSION,
        seq=seq,
        ts=f"2026-03-01T10:00:{seq:02d}.000000Z",
        type=type,
        actor="agent",
        payload=payload,
        caused_by=[],
        prev_hash=None,
        hash=digest,
        sig="",
        key_id="",
    )


_STORY: list[tuple[str, dict[str, Any]]] = [
    ("workflow.repository.seen", {"repository": "acme/app", "owner": "acme"}),
    (
        "workflow.issue.opened",
        {"issue": "acme/app#42", "author": "ann", "created_at": "2026-03-01T09:00:00Z", "title": "Crash"},
    ),
    (
        "workflow.run.started",
        {
            "run_id": RUN,
            "workflow_type": "fix",
            "agent": "coder",
            "issue": "acme/app#42",
            "metadata": {"a": 1},
        },
    ),
    ("workflow.message.recorded", {"run_id": RUN, "message_id": "nm1", "role": "user", "content": "fix it"}),
    (
        "workflow.tool.called",
        {"run_id": RUN, "call_id": "nc1", "tool_name": "grep", "parameters": {"q": "x"}},
    ),
    (
        "workflow.tool.returned",
        {
            "run_id": RUN,
            "call_id": "nc1",
            "result_id": "nr1",
            "is_error": True,
            "error_message": "no such file",
        },
    ),
    (
        "workflow.message.recorded",
        {"run_id": RUN, "message_id": "nm2", "role": "assistant", "content": "found", "responds_to": "nm1"},
    ),
    ("workflow.plan.proposed", {"run_id": RUN, "plan_id": "np1", "content": "v1", "issue": "acme/app#42"}),
    (
        "workflow.plan.reviewed",
        {
            "plan_id": "np1",
            "reviewer": "bob",
            "verdict": "commented",
            "comment_id": "nrc1",
            "comment": "use a lock",
            "suggests_edit": True,
        },
    ),
    (
        "workflow.plan.edited",
        {"plan_id": "np2", "parent_id": "np1", "content": "v2", "edited_by": "bob", "edit_message": "lock"},
    ),
    ("workflow.plan.reviewed", {"plan_id": "np2", "reviewer": "carol", "verdict": "approved"}),
    (
        "workflow.issue.updated",
        {"issue": "acme/app#42", "updated_at": "2026-03-02T00:00:00Z", "title": "Crash on start"},
    ),
    (
        "workflow.issue.updated",  # older, delivered late: its title loses, its state (unrivalled) wins
        {"issue": "acme/app#42", "updated_at": "2026-03-01T12:00:00Z", "title": "stale", "state": "closed"},
    ),
    (
        "workflow.pull_request.opened",
        {
            "pull_request": "acme/app#43",
            "author": "coder",
            "created_at": "2026-03-03T00:00:00Z",
            "resolves": ["acme/app#42"],
            "run_id": RUN,
        },
    ),
    ("workflow.plan.implemented", {"plan_id": "np2", "pull_request": "acme/app#43", "issue": "acme/app#42"}),
    (
        "workflow.comment.posted",
        {
            "item": "acme/app#42",
            "comment_id": "nic1",
            "author": "ann",
            "body": "thanks",
            "created_at": "2026-03-03T01:00:00Z",
        },
    ),
    ("workflow.run.completed", {"run_id": RUN, "status": "succeeded", "result": "merged"}),
]


def story() -> list[WorkflowChanges]:
    events.register()
    return [changes(_event(seq, type, payload)) for seq, (type, payload) in enumerate(_STORY, start=1)]


@pytest.fixture
async def store(neo4j_endpoint: Neo4jEndpoint) -> AsyncIterator[Neo4jWorkflowStore]:
    settings = Settings(
        neo4j_uri=neo4j_endpoint.uri, neo4j_user=neo4j_endpoint.user, neo4j_password=neo4j_endpoint.password
    )
    async with neo4j_workflow_store(settings) as opened:
        await opened.clear()
        yield opened


async def _labels(store: Neo4jWorkflowStore) -> dict[str, set[str]]:
    rows = await store._rows("MATCH (n:Message) RETURN n.key AS key, labels(n) AS labels", {})
    return {str(row["key"]): set(row["labels"]) for row in rows}


async def _dump(store: Neo4jWorkflowStore) -> tuple[list[str], list[str]]:
    """Every node and relationship of the model, as sorted text (what two ways of writing must agree on)."""
    nodes = await store._rows(
        f"MATCH (n) WHERE n:{MODEL_LABELS} RETURN labels(n) AS labels, properties(n) AS props",
        {},
    )
    rels = await store._rows(
        f"MATCH (a)-[e]->(b) WHERE a:{MODEL_LABELS} "
        "RETURN type(e) AS type, a.key AS source, b.key AS target, properties(e) AS props",
        {},
    )
    as_text = [f"{sorted(row['labels'])} {sorted(row['props'].items())}" for row in nodes]
    rel_text = [
        f"{row['type']} {row['source']} {row['target']} {sorted(row['props'].items())}" for row in rels
    ]
    return sorted(as_text), sorted(rel_text)


async def test_messages_carry_the_label_of_their_kind(store: Neo4jWorkflowStore) -> None:
    assert await store.apply("wf-labels", story()) == len(_STORY)
    labels = await _labels(store)
    assert labels["np1"] == labels["np2"] == {"Message", "Plan"}
    assert labels["nrc1"] == {"Message", "ReviewComment"}
    assert labels["nc1"] == {"Message", "ToolCall"}
    assert labels["nr1"] == {"Message", "ToolResult"}
    assert labels["nm1"] == labels["nm2"] == labels["nic1"] == {"Message"}
    assert set(KIND_LABELS.values()) == {"Plan", "ReviewComment", "ToolCall", "ToolResult"}


async def test_nodes_and_relationships_come_from_the_closed_sets(store: Neo4jWorkflowStore) -> None:
    await store.apply("wf-types", story())
    rows = await store._rows(
        f"MATCH (n) WHERE n:{MODEL_LABELS} UNWIND labels(n) AS label RETURN DISTINCT label", {}
    )
    assert {str(row["label"]) for row in rows} == {*NODE_LABELS, *KIND_LABELS.values()}
    rels = await store._rows(f"MATCH (n)-[e]->() WHERE n:{MODEL_LABELS} RETURN DISTINCT type(e) AS type", {})
    types = {str(row["type"]) for row in rels}
    assert types <= set(REL_TYPES)
    assert types == set(REL_TYPES) - {"REJECTS"}  # every type: no plan is rejected in the story
    chain = await store._rows(
        "MATCH (:Message {key: 'nm1'})-[:NEXT]->(:Message:ToolCall {key: 'nc1'})-[:NEXT]->"
        "(:Message:ToolResult {key: 'nr1'})<-[:HAS_RESULT]-(c:ToolCall) RETURN c.key AS key",
        {},
    )
    assert [row["key"] for row in chain] == ["nc1"]


async def test_the_schema_has_a_unique_key_per_label_and_the_read_indexes(store: Neo4jWorkflowStore) -> None:
    rows = await store._rows("SHOW CONSTRAINTS YIELD name, type, labelsOrTypes, properties", {})
    unique = {tuple(row["labelsOrTypes"]) for row in rows if row["properties"] == ["key"]}
    assert {(label,) for label in LABELS} <= unique
    indexes = {row["name"]: row for row in await store._rows("SHOW INDEXES YIELD name, state", {})}
    for name in (
        "workflow_run_started",
        "workflow_run_type_started",
        "workflow_tool_call_run",
        "workflow_tool_call_time",
        "workflow_tool_call_name_time",
    ):
        assert indexes[name]["state"] == "ONLINE"
    again = Neo4jWorkflowStore(store.uri, user=store._auth[0], password=store._auth[1])
    async with again:
        assert again.migrations_applied == []  # already there: opening again applies nothing


async def test_a_batch_writes_what_its_events_write_one_by_one(store: Neo4jWorkflowStore) -> None:
    batch = story()
    for item in batch:
        assert await store.apply("wf-one-by-one", [item]) == 1
    one_by_one = await _dump(store)
    await store.clear()
    assert await store.apply("wf-at-once", batch) == len(batch)
    assert await _dump(store) == one_by_one
    sequence = await store.sequence(SequenceQuestion(run_id=RUN))
    assert [m.message_id for m in sequence] == ["nm1", "nc1", "nr1", "nm2", "np1"]
    assert [m.position for m in sequence] == [1, 2, 3, 4, 5]


async def test_applying_again_is_harmless(store: Neo4jWorkflowStore) -> None:
    batch = story()
    assert await store.apply("wf-again", batch[:6]) == 6
    assert await store.applied_seqs("wf-again", [SESSION, "elsewhere"]) == {SESSION: 6}
    assert await store.apply("wf-again", batch) == len(batch) - 6  # the first six are below the checkpoint
    written = await _dump(store)
    assert await store.apply("wf-again", batch) == 0
    assert await store.apply("wf-other-projector", batch) == len(batch)  # its own checkpoint: writes again...
    assert await _dump(store) == written  # ...and every operation is idempotent: nothing changes


async def test_a_failing_batch_writes_nothing(store: Neo4jWorkflowStore) -> None:
    batch = story()
    cite = Cite(SESSION, len(batch) + 1, "f" * 64, "2026-03-04T00:00:00.000000Z")
    mixed = cast(Any, [1, "two"])  # Neo4j refuses a list of mixed types
    bad = UpsertNode(node=NodeRef("User", "mallory"), properties={"tags": mixed}, cite=cite)
    with pytest.raises(Neo4jError):
        await store.apply("wf-atomic", [*batch, WorkflowChanges(SESSION, cite.seq, cite.hash, [bad])])
    assert await store.applied_seqs("wf-atomic", [SESSION]) == {}
    assert await _dump(store) == ([], [])


async def test_clear_deletes_the_workflow_model_only(store: Neo4jWorkflowStore) -> None:
    await store.apply("wf-clear", story())
    await store._opened().execute_query(
        "MERGE (:KeywordDoc {uid: 'wf-clear-keep'})", database_=store.database
    )
    await store.clear()
    assert await _dump(store) == ([], [])
    assert await store.applied_seqs("wf-clear", [SESSION]) == {}
    kept = await store._rows("MATCH (d:KeywordDoc {uid: 'wf-clear-keep'}) RETURN count(d) AS n", {})
    assert kept == [{"n": 1}]
    migrations = await store._rows(
        "MATCH (m:Migration) WHERE m.name STARTS WITH 'workflow_' RETURN m.name AS n", {}
    )
    assert {row["n"] for row in migrations} == {name for name, _ in MIGRATIONS}  # the schema stays
    await store._opened().execute_query(
        "MATCH (d:KeywordDoc {uid: 'wf-clear-keep'}) DELETE d", database_=store.database
    )
    assert await store.apply("wf-clear", story()) == len(_STORY)  # rebuilt from the start


def _messages_from(session: str, run: str, count: int) -> list[WorkflowChanges]:
    """`count` messages of `run` recorded in `session` (a run fed from two sessions: two writers)."""
    events.register()
    told = [
        Event(
            v=1,
            session=session,
            seq=seq,
            ts=f"2026-03-05T00:00:{seq % 60:02d}.000000Z",
            type="workflow.message.recorded",
            actor="agent",
            payload={"run_id": run, "message_id": f"{session}-{seq}", "role": "user", "content": "hi"},
            caused_by=[],
            prev_hash=None,
            hash=hashlib.sha256(f"{session}/{seq}".encode()).hexdigest(),
            sig="",
            key_id="",
        )
        for seq in range(1, count + 1)
    ]
    return [changes(event) for event in told]


async def test_two_writers_sequencing_one_run_never_share_a_position(store: Neo4jWorkflowStore) -> None:
    run, per_writer, batch = "run-two-writers", 60, 10
    left, right = _messages_from("wf-left", run, per_writer), _messages_from("wf-right", run, per_writer)
    for start in range(0, per_writer, batch):
        done = await asyncio.gather(
            store.apply("wf-writers", left[start : start + batch]),
            store.apply("wf-writers", right[start : start + batch]),
        )
        assert list(done) == [batch, batch]
    sequence = await store.sequence(SequenceQuestion(run_id=run))
    assert [m.position for m in sequence] == list(range(1, 2 * per_writer + 1))
    path = await store.path(PathQuestion(run_id=run))
    assert [m.message_id for m in path] == [m.message_id for m in sequence]  # one NEXT chain through all
    for writer in ("wf-left", "wf-right"):  # each writer's messages keep their order within the run
        mine = [m.message_id for m in sequence if m.message_id.startswith(writer)]
        assert mine == [f"{writer}-{seq}" for seq in range(1, per_writer + 1)]
