"""What only the LadybugDB workflow store has: its fixed schema (a `kind` column where Neo4j has extra
labels), its refusal of what the schema cannot hold (naming the field, nothing of the batch written), its
migrations. The shared behaviour is in tests/test_workflow_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ladybug
import pytest

from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore
from gateway.packs.workflow.ladybug_writes import WorkflowWriteError
from gateway.packs.workflow.model import Cite, LinkNodes, NodeRef, Operation, UpsertNode, WorkflowChanges
from gateway.packs.workflow.reads import ItemQuestion, RunsQuestion
from readmodels.embedded.ladybug_io import run_rows
from tests.test_graph_support import ts
from tests.workflow_support import ISSUE, PROJECTOR, project, rocket_story, translated

pytestmark = pytest.mark.anyio
CITE = Cite("bad", 2, "ab" * 32, ts(2))


def rows(path: Path, cypher: str) -> list[dict[str, Any]]:
    """Read the closed store's database file directly."""
    database = ladybug.Database(str(path), read_only=True)
    try:
        connection = ladybug.Connection(database)
        try:
            return run_rows(connection, cypher, None)
        finally:
            connection.close()
    finally:
        database.close()


async def test_messages_of_every_kind_are_one_table_told_apart_by_kind(tmp_path: Path) -> None:
    path = tmp_path / "workflow.lbug"
    async with LadybugWorkflowStore(path) as store:
        await project(store, rocket_story().events)
    kinds = rows(path, "MATCH (m:Message) RETURN m.kind AS kind, count(*) AS n ORDER BY kind")
    assert kinds == [
        {"kind": "message", "n": 5},
        {"kind": "plan", "n": 2},
        {"kind": "review_comment", "n": 1},
        {"kind": "tool_call", "n": 3},
        {"kind": "tool_result", "n": 3},
    ]
    assert rows(path, "MATCH (:Message)-[r:NEXT]->(:Message) RETURN count(r) AS n") == [{"n": 10}]
    reviews = (
        "MATCH (:User)-[r:REVIEWS]->(p:Message) RETURN p.key AS plan, r.verdict AS verdict ORDER BY plan"
    )
    assert rows(path, reviews) == [
        {"plan": "plan-1", "verdict": "commented"},
        {"plan": "plan-2", "verdict": "approved"},
    ]


async def test_reopening_keeps_everything_and_migrates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "workflow.lbug"
    story = rocket_story()
    async with LadybugWorkflowStore(path) as store:
        assert store.migrations_applied == []  # nothing to keep yet: no database
        await project(store, story.events)
        assert store.migrations_applied == ["0000_migration_table", "0001_workflow"]
        before = (await store.runs(RunsQuestion()), await store.item(ItemQuestion(key=ISSUE)))
    async with LadybugWorkflowStore(path) as store:
        assert store.migrations_applied == []
        assert (await store.runs(RunsQuestion()), await store.item(ItemQuestion(key=ISSUE))) == before
        assert await store.applied_seqs(PROJECTOR, ["w1"]) == {"w1": len(story.events)}
        assert await project(store, story.events) == 0


def _bad(operation: Operation) -> WorkflowChanges:
    return WorkflowChanges("bad", 2, CITE.hash, [operation])


@pytest.mark.parametrize(
    ("operation", "message"),
    [
        (
            UpsertNode(node=NodeRef("Issue", ISSUE), properties={"colour": "red"}, cite=CITE),
            r"Issue\.colour: no such property",
        ),
        (
            UpsertNode(node=NodeRef("Issue", ISSUE), properties={"number": "42"}, cite=CITE),
            r"Issue\.number: expected INT64, got '42'",
        ),
        (
            UpsertNode(node=NodeRef("Issue", ISSUE), kind="plan", defines=True, cite=CITE),
            r"Issue\.kind: only a Message has a kind",
        ),
        (
            LinkNodes(
                type="HAS_RUNS",
                source=NodeRef("Repository", "a/b"),
                target=NodeRef("WorkflowRun", "r"),
                cite=CITE,
            ),
            "HAS_RUNS: no relationship from Repository to WorkflowRun",
        ),
        (
            LinkNodes(
                type="NEXT",
                source=NodeRef("Message", "a"),
                target=NodeRef("Message", "b"),
                properties={"weight": "3"},
                cite=CITE,
            ),
            r"NEXT\.weight: no such relationship property",
        ),
    ],
)
async def test_what_the_schema_cannot_hold_is_refused_by_name_and_nothing_is_written(
    tmp_path: Path, operation: Operation, message: str
) -> None:
    story = rocket_story()
    async with LadybugWorkflowStore(tmp_path / "workflow.lbug") as store:
        good = WorkflowChanges("bad", 1, "cd" * 32, translated(story.events[:2])[1].operations)
        with pytest.raises(WorkflowWriteError, match=message):
            await store.apply(PROJECTOR, [good, _bad(operation)])
        assert await store.applied_seqs(PROJECTOR, ["bad"]) == {}
        assert await store.item(ItemQuestion(key=ISSUE)) is None  # the good item went with the batch
        assert await store.apply(PROJECTOR, [good]) == 1
        issue = await store.item(ItemQuestion(key=ISSUE))
        assert issue is not None and issue.title == "Rocket wobbles"
