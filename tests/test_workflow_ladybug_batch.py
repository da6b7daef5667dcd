"""The LadybugDB workflow store writes a batch group by group (`ladybug_batch`): what a batch writes at
once is what its events write one by one, node by node and relationship by relationship, including what
one batch does to the same node, relationship or run more than once, and what replaying them under another
projector (every operation again, over what is stored) writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.packs.workflow.ladybug_schema import CHECKPOINT_TABLE, COLUMNS, LINKS_TABLE, PAIRS
from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore
from gateway.packs.workflow.model import (
    Cite,
    LinkNodes,
    NodeRef,
    Operation,
    ReviseItem,
    SequenceMessage,
    UpsertNode,
    VersionPlan,
    WorkflowChanges,
)
from tests.test_graph_support import ts
from tests.workflow_support import rocket_story, translated

pytestmark = pytest.mark.anyio
SESSION = "twice"


def _dump(store: LadybugWorkflowStore) -> list[str]:
    """Every node and relationship of the store, with all its columns, as sorted text."""
    lines = []
    for label in [*COLUMNS, LINKS_TABLE]:
        for row in store._execute(f"MATCH (n:{label}) RETURN n"):
            node = {k: v for k, v in row["n"].items() if not k.startswith("_")}
            lines.append(json.dumps([label, node], sort_keys=True))
    for rel in PAIRS:
        for row in store._execute(f"MATCH (a)-[e:{rel}]->(b) RETURN a.key AS a, b.key AS b, e"):
            props = {k: v for k, v in row["e"].items() if not k.startswith("_")}
            lines.append(json.dumps([rel, row["a"], row["b"], props], sort_keys=True))
    return sorted(lines)


def _twice() -> list[WorkflowChanges]:
    """Events that touch the same things more than once: a message sequenced again, a plan versioned in a
    chain, an issue revised twice (the later delivery older), a once-only link given twice, a node upserted
    by parts."""

    def cite(seq: int) -> Cite:
        return Cite(SESSION, seq, f"{seq:064x}", ts(seq))

    def plan(key: str) -> NodeRef:
        return NodeRef("Message", key)

    def user(key: str) -> NodeRef:
        return NodeRef("User", key)

    issue = NodeRef("Issue", "acme/rocket#7")
    events: list[list[Operation]] = [
        [UpsertNode(node=plan("p1"), properties={"content": "v1"}, defines=True, kind="plan", cite=cite(1))],
        [
            SequenceMessage(run="r1", message="p1", cite=cite(2)),
            VersionPlan(plan="p1", parent=None, cite=cite(2)),
        ],
        [
            SequenceMessage(run="r1", message="p1", cite=cite(3)),
            SequenceMessage(run="r1", message="p2", cite=cite(3)),
        ],
        [
            VersionPlan(plan="p2", parent="p1", cite=cite(4)),
            VersionPlan(plan="p3", parent="p2", cite=cite(4)),
        ],
        [UpsertNode(node=plan("p2"), properties={"role": "assistant", "content": None}, cite=cite(5))],
        [ReviseItem(item=issue, values={"title": "new", "state": "open"}, at=ts(20), cite=cite(6))],
        [ReviseItem(item=issue, values={"title": "old", "labels": ["bug"]}, at=ts(10), cite=cite(7))],
        [LinkNodes(type="CREATED_BY", source=plan("p2"), target=user("bob"), cite=cite(8))],
        [
            LinkNodes(
                type="CREATED_BY", source=plan("p2"), target=user("bob"), properties={"at": "x"}, cite=cite(9)
            )
        ],
        [LinkNodes(type="RESPONDS_TO", source=plan("p3"), target=plan("p1"), cite=cite(10))],
        [LinkNodes(type="RESPONDS_TO", source=plan("p3"), target=plan("p2"), cite=cite(11))],
        [LinkNodes(type="REVIEWS", source=user("bob"), target=plan("p2"), each_event=True, cite=cite(12))],
        [UpsertNode(node=plan("p2"), properties={"kind": "plan"}, defines=True, cite=cite(13))],
        [SequenceMessage(run="r1", message="p3", cite=cite(14))],
    ]
    return [WorkflowChanges(SESSION, seq, f"{seq:064x}", ops) for seq, ops in enumerate(events, start=1)]


@pytest.mark.parametrize("story", ["rocket", "twice"])
async def test_a_batch_writes_what_its_events_write_one_by_one(tmp_path: Path, story: str) -> None:
    batch = translated(rocket_story().events) if story == "rocket" else _twice()
    async with (
        LadybugWorkflowStore(tmp_path / "one.lbug") as one,
        LadybugWorkflowStore(tmp_path / "all.lbug") as at_once,
    ):
        for item in batch:
            assert await one.apply("one-by-one", [item]) == 1
        assert await at_once.apply("at-once", batch) == len(batch)
        written = _dump(one)
        assert _dump(at_once) == written
        assert await at_once.apply("again", batch) == len(batch)  # every operation again, over itself
        assert await one.apply("again", batch[:3]) == 3
        assert await one.apply("again", batch) == len(batch) - 3
        assert _dump(at_once) == _dump(one) != written  # a relationship per event is written again
        checkpoints = at_once._execute(f"MATCH (c:{CHECKPOINT_TABLE}) RETURN c.projector AS p, c.seq AS seq")
        assert sorted((row["p"], row["seq"]) for row in checkpoints)[-2:] == [
            ("again", batch[-1].seq),
            ("at-once", batch[-1].seq),
        ]


async def test_what_one_batch_does_twice_reads_back_in_order(tmp_path: Path) -> None:
    async with LadybugWorkflowStore(tmp_path / "w.lbug") as store:
        await store.apply("twice", _twice())
        messages = store._execute(
            "MATCH (m:Message) RETURN m.key AS key, m.position AS position, m.version AS version, "
            "m.originalVersion AS original, m.supersededBy AS next ORDER BY key"
        )
        assert messages == [
            {"key": "p1", "position": 1, "version": 1, "original": "p1", "next": "p2"},
            {"key": "p2", "position": 2, "version": 2, "original": "p1", "next": "p3"},
            {"key": "p3", "position": 3, "version": 3, "original": "p1", "next": None},
        ]
        following = store._execute("MATCH (a:Message)-[:NEXT]->(b:Message) RETURN a.key AS a, b.key AS b")
        assert sorted((row["a"], row["b"]) for row in following) == [("p1", "p2"), ("p2", "p3")]
        run = store._execute("MATCH (r:WorkflowRun) RETURN r.messageCount AS n, r.lastMessage AS last")
        assert run == [{"n": 3, "last": "p3"}]
        item = store._execute("MATCH (i:Issue) RETURN i.title AS title, i.state AS state, i.labels AS labels")
        assert item == [{"title": "new", "state": "open", "labels": ["bug"]}]  # the older title lost
        column = store._execute("MATCH (m:Message {key: 'p3'}) RETURN m.respondsTo AS to")
        assert column == [{"to": "p2"}]
