"""Grouping a batch's operations into few statements without changing what they write (both stores).

A store applies each operation in order; one statement per operation would be a round trip each on Neo4j
and a statement's fixed cost each on LadybugDB. Operations of the same *shape* (an upsert of one label,
a link of one type between two labels, a run's sequencing...) go into one group, run as one statement
over its rows in order. Two operations of different shapes may swap places only when they touch nothing
in common, so every operation declares what it touches, property by property (`(label, key, property)`):
an operation joins the latest group of its shape unless it touches something a later group of another
shape touched, in which case it starts a new group after it. Groups run in the order they were made.
Same-shape order inside a group is row order, which the executors keep (`neo4j_writes`,
`ladybug_batch`). A store that writes more than the model says (LadybugDB keeps some relationships' far
ends in columns) passes its own `touches`, a superset of this one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from gateway.packs.workflow.model import (
    FinishRun,
    LinkNodes,
    Operation,
    ReviseItem,
    SequenceMessage,
    SetPlanStatus,
    UpsertNode,
    VersionPlan,
)

Shape: TypeAlias = tuple[str, ...]
Touch: TypeAlias = tuple[str, str, str]
"""(label, key, property): one property of one node that an operation reads or writes."""
Touches: TypeAlias = Callable[[Operation], Iterable[Touch]]

CITATION: Final = ("session", "seq", "hash", "kind")
VERSIONING: Final = ("version", "originalVersion", "supersededBy", "current")
RUN_END: Final = ("status", "result", "completedAt")
SEQUENCE: Final = "#sequence"
"""A run's count of positioned messages and its last one (`messageCount`, `lastMessage`)."""


def shape_of(op: Operation) -> Shape:
    if isinstance(op, UpsertNode):
        return ("upsert", op.node.label)
    if isinstance(op, LinkNodes):
        return ("link", op.type, op.source.label, op.target.label, "each" if op.each_event else "one")
    if isinstance(op, ReviseItem):
        return ("revise", op.item.label)
    if isinstance(op, SequenceMessage):
        return ("sequence",)
    if isinstance(op, VersionPlan):
        return ("version",)
    if isinstance(op, SetPlanStatus):
        return ("status",)
    return ("finish",)


def touches(op: Operation) -> Iterable[Touch]:
    """What `op` reads or writes on nodes. Links touch only their own relationship, which no other shape
    writes, and every node is created by an idempotent `MERGE`: neither orders anything."""
    if isinstance(op, UpsertNode):
        label, key = op.node.label, op.node.key
        named = [name for name, value in op.properties.items() if value is not None]
        return [(label, key, name) for name in (*named, *(CITATION if op.defines else ()))]
    if isinstance(op, ReviseItem):
        label, key = op.item.label, op.item.key
        return [(label, key, name) for value in op.values for name in (value, f"{value}At")]
    if isinstance(op, SequenceMessage):
        return [("WorkflowRun", op.run, SEQUENCE), ("Message", op.message, "position")]
    if isinstance(op, VersionPlan):
        versions = [op.plan] if op.parent is None else [op.plan, op.parent]
        return [("Message", key, name) for key in versions for name in VERSIONING]
    if isinstance(op, SetPlanStatus):
        return [("Message", op.plan, "status")]
    if isinstance(op, FinishRun):
        return [("WorkflowRun", op.run, name) for name in RUN_END]
    return []


@dataclass
class Group:
    shape: Shape
    operations: list[Operation] = field(default_factory=list)


@dataclass
class Schedule:
    touched: Touches = field(default_factory=lambda: touches)
    groups: list[Group] = field(default_factory=list)
    _latest: dict[Shape, int] = field(default_factory=dict)
    _marks: dict[Touch, dict[Shape, int]] = field(default_factory=dict)

    def add(self, op: Operation) -> None:
        shape = shape_of(op)
        marks = list(self.touched(op))
        index = self._latest.get(shape, -1)
        if index >= 0 and self._after(shape, marks, index):
            index = -1
        if index < 0:
            index = len(self.groups)
            self.groups.append(Group(shape))
            self._latest[shape] = index
        self.groups[index].operations.append(op)
        for mark in marks:
            self._marks.setdefault(mark, {})[shape] = index

    def _after(self, shape: Shape, marks: list[Touch], index: int) -> bool:
        """Whether a group of another shape at or after `index` touched one of `marks`."""
        for mark in marks:
            for other, at in self._marks.get(mark, {}).items():
                if at >= index and other != shape:
                    return True
        return False


def schedule(operations: Sequence[Operation], touched: Touches = touches) -> list[Group]:
    """The groups to run, in order, that write what running `operations` one by one writes, given what
    each operation reads or writes (`touched`)."""
    plan = Schedule(touched)
    for op in operations:
        plan.add(op)
    return plan.groups
