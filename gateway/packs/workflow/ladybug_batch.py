"""Applying a batch of the workflow model's operations to LadybugDB, each as its docstring in `model` says.

The batch is grouped (`schedule`, told what LadybugDB writes beyond the model: the far-end columns of
`DENORMALIZED`, a sequenced message's `runId`, a version's `parentId`, the revision nodes and the
relationships some operations merge). What an operation reads (a run's count and last message, a plan's
version, a property's latest `at`, whether a relationship or a node exists) is read once per group (nodes
once per batch), then carried forward in Python, operation after operation, in order. What it writes is
held until the batch's end (`Writes`): then the new nodes are created with their final columns, the
others' columns set, and the new relationships created, a statement per label or type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gateway.packs.workflow import ladybug_derived
from gateway.packs.workflow.ladybug_derived import revision_key
from gateway.packs.workflow.ladybug_schema import DENORMALIZED, LINKS_TABLE
from gateway.packs.workflow.ladybug_writes import (
    WorkflowWriteError,
    Writes,
    checked,
    cite,
    link_properties,
    missing_nodes,
)
from gateway.packs.workflow.model import (
    FinishRun,
    LinkNodes,
    NodeLabel,
    Operation,
    ReviseItem,
    SequenceMessage,
    SetPlanStatus,
    UpsertNode,
    VersionPlan,
)
from gateway.packs.workflow.schedule import Group, Touch, schedule, touches
from readmodels.graph.cypher.io import Execute, Row

_REVISION_COLUMNS: Final = ("id", "item", "label", "at", "values", "session", "seq", "hash")


def touched(op: Operation) -> list[Touch]:
    """What `op` reads or writes on LadybugDB: `schedule.touches`, plus the columns this store keeps
    beyond the model and the relationships that an operation finds before writing (`edge:<TYPE>`)."""
    marks = list(touches(op))
    if isinstance(op, LinkNodes):
        column = DENORMALIZED.get(op.type)
        if column is not None:
            marks.append((op.source.label, op.source.key, column))
        marks.append((f"edge:{op.type}", op.source.key, op.target.key))
    elif isinstance(op, SequenceMessage):
        marks += [("Message", op.message, "runId"), ("WorkflowRun", op.run, "messageCount")]
        marks.append(("WorkflowRun", op.run, "lastMessage"))
    elif isinstance(op, VersionPlan) and op.parent is not None:
        marks += [("Message", op.plan, "parentId"), ("edge:PREVIOUS_VERSION", op.plan, op.parent)]
    elif isinstance(op, ReviseItem):
        revision = revision_key(op)
        marks += [("Revision", revision, name) for name in _REVISION_COLUMNS]
        marks.append(("edge:HAS_REVISION", op.item.key, revision))
    return marks


def _refs(op: Operation) -> list[tuple[NodeLabel, str]]:
    """The nodes `op` merges."""
    if isinstance(op, UpsertNode):
        return [(op.node.label, op.node.key)]
    if isinstance(op, LinkNodes):
        return [(op.source.label, op.source.key), (op.target.label, op.target.key)]
    if isinstance(op, ReviseItem):
        if op.item.label not in ("Issue", "PullRequest"):
            raise WorkflowWriteError(
                f"ReviseItem.item: only an Issue or a PullRequest is revised, not a {op.item.label}"
            )
        return [(op.item.label, op.item.key), ("Revision", revision_key(op))]
    if isinstance(op, SequenceMessage):
        return [("Message", op.message), ("WorkflowRun", op.run)]
    if isinstance(op, VersionPlan):
        if op.parent == op.plan:
            raise WorkflowWriteError(f"VersionPlan.parent: plan {op.plan!r} cannot follow itself")
        return [("Message", key) for key in (op.plan, op.parent) if key is not None]
    if isinstance(op, SetPlanStatus):
        return [("Message", op.plan)]
    return [("WorkflowRun", op.run)]


def upserts(writes: Writes, label: NodeLabel, ops: Sequence[UpsertNode]) -> None:
    values: dict[str, Row] = {}
    for op in ops:
        row = values.setdefault(op.node.key, {})
        for name, value in op.properties.items():
            if value is not None:
                row[name] = checked(label, name, value)
        if op.defines:
            row.update(cite(op.cite))
            if op.kind is not None:
                if label != "Message":
                    raise WorkflowWriteError(f"{label}.kind: only a Message has a kind")
                row["kind"] = op.kind
    writes.set_nodes(label, values)


def _link_key(op: LinkNodes) -> str:
    return f"{op.type}\x1f{op.source.label}:{op.source.key}\x1f{op.target.label}:{op.target.key}"


class LinkKeys:
    """The keys in `LINKS_TABLE` of a batch's once-only links: looked up at once, created at once."""

    def __init__(self, execute: Execute, operations: Sequence[Operation]) -> None:
        keys = [_link_key(op) for op in operations if isinstance(op, LinkNodes) and not op.each_event]
        found = execute(
            f"UNWIND $keys AS k MATCH (l:{LINKS_TABLE} {{key: k}}) RETURN l.key AS key",
            {"keys": list(dict.fromkeys(keys))},
        )
        self.known = {str(row["key"]) for row in found}
        self.new: list[str] = []

    def add(self, key: str) -> bool:
        """Whether the link `key` names is new (then it is known from now on)."""
        if key in self.known:
            return False
        self.known.add(key)
        self.new.append(key)
        return True

    def write(self, execute: Execute) -> None:
        if self.new:
            execute(f"UNWIND $keys AS k CREATE (:{LINKS_TABLE} {{key: k}})", {"keys": self.new})


def links(writes: Writes, ops: Sequence[LinkNodes], link_keys: LinkKeys) -> None:
    """Links of one type between two labels: one per event, or one per (type, source, target), known by
    its key in `LINKS_TABLE`; if known, its columns are set again."""
    first = ops[0]
    rel, ends = first.type, (first.source.label, first.target.label)
    column = DENORMALIZED.get(rel)
    if column is not None:
        writes.set_nodes(ends[0], {op.source.key: {column: op.target.key} for op in ops})
    if first.each_event:
        rows = [
            {"a": op.source.key, "b": op.target.key, "uid": f"{op.cite.session}/{op.cite.seq}"}
            | link_properties(op)
            for op in ops
        ]
        writes.create_edges(rel, ends, rows)
        return
    created: dict[str, Row] = {}
    updated: dict[str, Row] = {}
    for op in ops:
        key, row = _link_key(op), link_properties(op)
        if key in created or link_keys.add(key):
            created.setdefault(key, {"a": op.source.key, "b": op.target.key}).update(row)
        else:
            updated.setdefault(key, {"a": op.source.key, "b": op.target.key}).update(row)
    writes.create_edges(rel, ends, list(created.values()))
    writes.update_edges(rel, ends, list(updated.values()))


def statuses(writes: Writes, ops: Sequence[SetPlanStatus]) -> None:
    writes.set_nodes("Message", {op.plan: {"status": op.status} for op in ops})


def finishes(writes: Writes, ops: Sequence[FinishRun]) -> None:
    ends: dict[str, Row] = {}
    for op in ops:
        end = ends.setdefault(op.run, {})
        end.update(status=op.status, completedAt=op.cite.ts)
        if op.result is not None:
            end["result"] = op.result
    writes.set_nodes("WorkflowRun", ends)


def _group(writes: Writes, group: Group, link_keys: LinkKeys) -> None:
    kind, ops = group.shape[0], group.operations
    if kind == "upsert":
        upserts(writes, group.shape[1], [op for op in ops if isinstance(op, UpsertNode)])  # type: ignore[arg-type]
    elif kind == "link":
        links(writes, [op for op in ops if isinstance(op, LinkNodes)], link_keys)
    elif kind == "revise":
        revised = [op for op in ops if isinstance(op, ReviseItem)]
        ladybug_derived.revisions(writes, revised[0].item.label, revised)
    elif kind == "sequence":
        ladybug_derived.sequence(writes, [op for op in ops if isinstance(op, SequenceMessage)])
    elif kind == "version":
        ladybug_derived.versions(writes, [op for op in ops if isinstance(op, VersionPlan)])
    elif kind == "status":
        statuses(writes, [op for op in ops if isinstance(op, SetPlanStatus)])
    else:
        finishes(writes, [op for op in ops if isinstance(op, FinishRun)])


def write_operations(execute: Execute, operations: Sequence[Operation]) -> None:
    """Apply `operations` (a batch's, in order) as their docstrings in `model` say; the caller holds the
    transaction."""
    writes = Writes(execute, missing_nodes(execute, (ref for op in operations for ref in _refs(op))))
    link_keys = LinkKeys(execute, operations)
    for group in schedule(operations, touched):
        _group(writes, group, link_keys)
    writes.write()
    link_keys.write(execute)
