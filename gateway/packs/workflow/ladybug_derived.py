"""The operations whose values follow from what is stored: revisions, a run's sequence, plan versions.

Each group reads what its operations read once (a property's latest `at`, a run's count and last
message, a plan's version, whether a relationship is there already), then works out every operation in
order in Python, carrying what each writes to the next, and writes the final values at once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from gateway.packs.workflow.ladybug_schema import REVISABLE
from gateway.packs.workflow.ladybug_writes import (
    WorkflowWriteError,
    Writes,
    checked,
    cite,
)
from gateway.packs.workflow.model import NodeLabel, ReviseItem, SequenceMessage, VersionPlan
from readmodels.graph.cypher.io import Row


def revision_key(op: ReviseItem) -> str:
    return f"{op.item.label}:{op.item.key}@{op.cite.session}/{op.cite.seq}"


class _Edges:
    """Relationships a group merges (`MERGE (a)-[:REL]->(b)`): created once, then their columns set."""

    def __init__(self, existing: set[tuple[str, str]]) -> None:
        self.existing = existing
        self.created: dict[tuple[str, str], Row] = {}
        self.updated: dict[tuple[str, str], Row] = {}

    def merge(self, a: str, b: str, columns: Row) -> None:
        pair = (a, b)
        if pair in self.existing and pair not in self.created:
            self.updated.setdefault(pair, {"a": a, "b": b}).update(columns)
        else:
            self.created.setdefault(pair, {"a": a, "b": b}).update(columns)

    def write(self, writes: Writes, rel: str, ends: tuple[str, str]) -> None:
        writes.create_edges(rel, ends, list(self.created.values()))
        writes.update_edges(rel, ends, list(self.updated.values()))


def revisions(writes: Writes, label: NodeLabel, ops: Sequence[ReviseItem]) -> None:
    """Every revision kept; on the item, each property takes its latest value by `at` (ties: the last)."""
    latest = writes.stored(label, (op.item.key for op in ops), [f"{name}At" for name in REVISABLE])
    pairs = [(op.item.key, revision_key(op)) for op in ops]
    edges = _Edges(writes.existing_edges("HAS_REVISION", (label, "Revision"), pairs))
    items: dict[str, Row] = {}
    revised: dict[str, Row] = {}
    for op in ops:
        given = {name: value for name, value in op.values.items() if value is not None}
        for name, value in given.items():
            if name not in REVISABLE:
                raise WorkflowWriteError(
                    f"{label}.{name}: not a revisable property (known: {sorted(REVISABLE)})"
                )
            known = latest[op.item.key][f"{name}At"]
            if known is None or known <= op.at:  # latest `at` wins; a tie goes to the revision applied last
                items.setdefault(op.item.key, {}).update(
                    {name: checked(label, name, value), f"{name}At": op.at}
                )
                latest[op.item.key][f"{name}At"] = op.at
        revision = revision_key(op)
        values = json.dumps(given, sort_keys=True, separators=(",", ":"))
        revised[revision] = {"id": revision, "item": op.item.key, "label": label, "at": op.at}
        revised[revision].update(values=values, **cite(op.cite))
        edges.merge(op.item.key, revision, {"at": op.at, **cite(op.cite)})
    writes.set_nodes("Revision", revised)
    edges.write(writes, "HAS_REVISION", (label, "Revision"))
    writes.set_nodes(label, items)


def sequence(writes: Writes, ops: Sequence[SequenceMessage]) -> None:
    """Each message last in its run (`position` = count + 1, `NEXT` from the last); placed ones stay."""
    runs = writes.stored("WorkflowRun", (op.run for op in ops), ["messageCount", "lastMessage"])
    placed = writes.stored("Message", (op.message for op in ops), ["position"])
    messages: dict[str, Row] = {}
    following: list[Row] = []
    moved: dict[str, Row] = {}
    for op in ops:
        if placed[op.message]["position"] is not None:
            continue  # a message already positioned is left where it is
        run = runs[op.run]
        position = int(run["messageCount"] or 0) + 1
        messages[op.message] = {"position": position, "runId": op.run}
        if run["lastMessage"] is not None:
            following.append({"a": run["lastMessage"], "b": op.message, "at": op.cite.ts, **cite(op.cite)})
        run.update(messageCount=position, lastMessage=op.message)
        moved[op.run] = run
        placed[op.message]["position"] = position
    writes.set_nodes("Message", messages)
    writes.set_nodes("WorkflowRun", moved)
    writes.create_edges("NEXT", ("Message", "Message"), following)


def versions(writes: Writes, ops: Sequence[VersionPlan]) -> None:
    """`version` = the parent's + 1 (a parent not yet versioned counts as 0), `originalVersion` = the
    parent's original (or the parent), `PREVIOUS_VERSION` to it, and the parent superseded."""
    keys = [key for op in ops for key in (op.plan, op.parent) if key is not None]
    known = writes.stored("Message", keys, ["version", "originalVersion"])
    pairs = [(op.plan, op.parent) for op in ops if op.parent is not None]
    edges = _Edges(writes.existing_edges("PREVIOUS_VERSION", ("Message", "Message"), pairs))
    plans: dict[str, Row] = {}
    for op in ops:
        if op.parent is None:
            values: Row = {"version": 1, "originalVersion": op.plan}
        else:
            if op.parent == op.plan:
                raise WorkflowWriteError(f"VersionPlan.parent: plan {op.plan!r} cannot follow itself")
            parent = known[op.parent]
            original = parent["originalVersion"]
            values = {
                "version": int(parent["version"] or 0) + 1,
                "originalVersion": op.parent if original is None else original,
                "parentId": op.parent,
            }
            plans.setdefault(op.parent, {}).update(supersededBy=op.plan, current=False)
            edges.merge(op.plan, op.parent, {"at": op.cite.ts, **cite(op.cite)})
        plans.setdefault(op.plan, {}).update(values)
        known[op.plan].update(version=values["version"], originalVersion=values["originalVersion"])
    edges.write(writes, "PREVIOUS_VERSION", ("Message", "Message"))
    writes.set_nodes("Message", plans)
