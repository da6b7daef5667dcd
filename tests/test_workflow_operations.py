"""The workflow store's writing contract, on LadybugDB and Neo4j: a batch applied again changes nothing,
a failing batch writes nothing, and each hand-made operation does what its docstring in `model` says."""

from __future__ import annotations

from typing import Any, cast

import pytest

from eventloom.event import citation
from gateway.packs.workflow.model import (
    Cite,
    FinishRun,
    LinkNodes,
    MessageKind,
    NodeRef,
    Operation,
    ReviseItem,
    Scalar,
    SequenceMessage,
    UpsertNode,
    VersionPlan,
    WorkflowChanges,
)
from gateway.packs.workflow.projector import WorkflowStore
from gateway.packs.workflow.reads import (
    ItemQuestion,
    PathQuestion,
    PlanQuestion,
    RunsQuestion,
    SequenceQuestion,
)
from tests.test_graph_support import ts
from tests.workflow_support import PROJECTOR, Story, project, rocket_story, translated

pytestmark = pytest.mark.anyio

from tests.test_workflow_contract import backend, everything, story, workflow_store  # noqa: E402

__all__ = ["backend", "story", "workflow_store"]  # the fixtures, used by name


async def test_applying_a_batch_again_changes_nothing(workflow_store: WorkflowStore, story: Story) -> None:
    before = await everything(workflow_store)
    last = len(story.events)
    assert await workflow_store.applied_seqs(PROJECTOR, ["w1", "elsewhere"]) == {"w1": last}
    assert await project(workflow_store, story.events) == 0
    assert await project(workflow_store, story.events[-5:]) == 0
    assert await everything(workflow_store) == before
    assert await workflow_store.applied_seqs(PROJECTOR, ["w1"]) == {"w1": last}
    assert await workflow_store.applied_seqs("another-projector", ["w1"]) == {}


async def test_a_batch_that_fails_midway_writes_nothing(workflow_store: WorkflowStore) -> None:
    told = rocket_story()
    head, tail = told.events[:3], told.events[3:]
    assert await project(workflow_store, head) == 3
    before = await everything(workflow_store)
    batch = [*translated(tail[:6]), cast(WorkflowChanges, _Exploding("w1", tail[6].seq, tail[6].hash))]
    with pytest.raises(RuntimeError, match="boom"):
        await workflow_store.apply(PROJECTOR, batch)
    assert await everything(workflow_store) == before
    assert await workflow_store.applied_seqs(PROJECTOR, ["w1"]) == {"w1": 3}
    assert await project(workflow_store, tail) == len(tail)  # the store goes on where it stood
    sequence = await workflow_store.sequence(SequenceQuestion(run_id="run-1"))
    assert [(m.position, m.message_id) for m in sequence] == [
        (1, "m1"), (2, "m2"), (3, "call-1"), (4, "call-1-result"), (5, "call-2"), (6, "call-2-result")
    ]  # fmt: skip


class _Exploding:
    """A batch item that fails when its operations are read: the error comes midway through a batch."""

    def __init__(self, session: str, seq: int, event_hash: str) -> None:
        self.session, self.seq, self.event_hash = session, seq, event_hash

    @property
    def operations(self) -> list[Any]:
        raise RuntimeError("boom")


# -- the operations, hand-made ---------------------------------------------------------------------------


def _cite(seq: int) -> Cite:
    return Cite("h1", seq, f"{seq:064x}", ts(seq))


def _message(key: str, seq: int, kind: MessageKind = "message", **props: Scalar) -> UpsertNode:
    given: dict[str, Scalar] = {"id": key, "role": "assistant", "content": key, "runId": "r", **props}
    return UpsertNode(
        node=NodeRef("Message", key), properties=given, defines=True, kind=kind, cite=_cite(seq)
    )


def _in_run(key: str, seq: int, kind: MessageKind = "message", **props: Scalar) -> list[Operation]:
    run = NodeRef("WorkflowRun", "r")
    return [
        _message(key, seq, kind, **props),
        LinkNodes(type="PART_OF", source=NodeRef("Message", key), target=run, cite=_cite(seq)),
        SequenceMessage(run="r", message=key, cite=_cite(seq)),
    ]


def _plan_version(key: str, seq: int, parent: str | None, status: str) -> list[Operation]:
    """A plan version as translate writes one: current and naming its parent until a later one follows."""
    return [
        *_in_run(key, seq, "plan", status=status, current=True, parentId=parent),
        VersionPlan(plan=key, parent=parent, cite=_cite(seq)),
    ]


def _revise(seq: int, at: str, **values: Scalar) -> ReviseItem:
    return ReviseItem(item=NodeRef("Issue", "acme/rocket#1"), values=values, at=at, cite=_cite(seq))


async def test_operations_do_what_their_docstrings_say(workflow_store: WorkflowStore) -> None:
    start = UpsertNode(
        node=NodeRef("WorkflowRun", "r"),
        properties={"id": "r", "workflowType": "t", "startedAt": ts(1), "status": "running"},
        defines=True,
        cite=_cite(1),
    )
    operations: list[list[Operation]] = [
        [start, *_in_run("m1", 1)],
        [*_in_run("m2", 2), SequenceMessage(run="r", message="m1", cite=_cite(2))],  # m1 stays first
        _plan_version("p1", 3, None, "pending_review"),
        _plan_version("p2", 4, "p1", "pending_review"),
        _plan_version("p3", 5, "p2", "approved"),
        [FinishRun(run="r", status="succeeded", result=None, cite=_cite(6))],
        [_revise(7, "2025-06-01T00:00:00.000000Z", title="A", labels=["x"])],
        [_revise(8, "2025-06-01T00:00:00.000000Z", title="B")],  # the same instant: applied last wins
        [_revise(9, "2025-05-01T00:00:00.000000Z", title="C", state="open")],  # older: history only
    ]
    batch = [WorkflowChanges("h1", seq, f"{seq:064x}", ops) for seq, ops in enumerate(operations, start=1)]
    assert await workflow_store.apply(PROJECTOR, batch) == len(batch)
    sequence = await workflow_store.sequence(SequenceQuestion(run_id="r"))
    assert [(m.message_id, m.position, m.kind) for m in sequence] == [
        ("m1", 1, "message"), ("m2", 2, "message"), ("p1", 3, "plan"), ("p2", 4, "plan"), ("p3", 5, "plan")
    ]  # fmt: skip
    assert [m.message_id for m in await workflow_store.path(PathQuestion(message_id="m2"))] == [
        "m2",
        "p1",
        "p2",
        "p3",
    ]
    history = await workflow_store.plan(PlanQuestion(plan_id="p2"))
    assert history is not None and history.current is not None
    lineage = [
        (v.plan_id, v.version, v.original_version, v.superseded_by, v.current) for v in history.versions
    ]
    assert lineage == [
        ("p1", 1, "p1", "p2", False),
        ("p2", 2, "p1", "p3", False),
        ("p3", 3, "p1", None, True),
    ]
    assert (history.current.plan_id, history.current.parent_id, history.current.status) == (
        "p3",
        "p2",
        "approved",
    )
    (run,) = await workflow_store.runs(RunsQuestion())
    assert (run.status, run.completed_at, run.result, run.messages) == ("succeeded", ts(6), None, 5)
    issue = await workflow_store.item(ItemQuestion(key="acme/rocket#1"))
    assert issue is not None
    assert (issue.title, issue.state, issue.labels, issue.citation) == ("B", "open", ["x"], None)
    assert [(r.values, r.citation) for r in issue.history] == [
        ({"title": "C", "state": "open"}, citation("h1", 9, f"{9:064x}")),
        ({"title": "A", "labels": ["x"]}, citation("h1", 7, f"{7:064x}")),
        ({"title": "B"}, citation("h1", 8, f"{8:064x}")),
    ]
