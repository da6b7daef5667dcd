"""Writing the workflow model's operations to Neo4j, group by group (`schedule`), in one transaction.

Each group is one `UNWIND $rows AS r ...` statement (in chunks), its rows in the operations' order. Labels
and relationship types in the Cypher text come from the closed sets of `model` (a group's shape); every
value is a parameter. The operations that depend on what is stored (a run's next position, a plan's next
version, whether a revision is the latest of its property) read it first, inside the same transaction, and
work out their rows in order in Python: within one statement Neo4j may read every row before writing any.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from neo4j import AsyncManagedTransaction

from gateway.packs.workflow.model import (
    KIND_LABELS,
    Cite,
    FinishRun,
    LinkNodes,
    Operation,
    ReviseItem,
    SequenceMessage,
    SetPlanStatus,
    UpsertNode,
    VersionPlan,
)
from gateway.packs.workflow.schedule import Group, schedule
from readmodels.graph.cypher.io import Row
from readmodels.neo4j.driver import fetch

ROWS_PER_STATEMENT: Final = 5_000
LOCK: Final = "workflowLock"
"""A property set and removed at once: how Cypher takes a node's write lock (nothing of it is stored)."""


async def _run(tx: AsyncManagedTransaction, statement: str, rows: list[Row]) -> None:
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        result = await tx.run(
            f"UNWIND $rows AS r {statement}", {"rows": rows[start : start + ROWS_PER_STATEMENT]}
        )
        await result.consume()


def _cite(cite: Cite) -> dict[str, Any]:
    return {"session": cite.session, "seq": cite.seq, "hash": cite.hash}


def _given(properties: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in properties.items() if value is not None}


async def _upserts(tx: AsyncManagedTransaction, label: str, ops: Sequence[UpsertNode]) -> None:
    rows: list[Row] = []
    for op in ops:
        props = _given(op.properties)
        if op.defines:
            props.update(_cite(op.cite))
            if op.kind is not None:
                props["kind"] = op.kind
        rows.append({"key": op.node.key, "props": props})
    await _run(tx, f"MERGE (n:{label} {{key: r.key}}) SET n += r.props", rows)
    if label != "Message":
        return
    for kind, extra in KIND_LABELS.items():
        keys = dict.fromkeys(op.node.key for op in ops if op.defines and op.kind == kind)
        if keys:
            await _run(tx, f"MATCH (n:Message {{key: r.key}}) SET n:{extra}", [{"key": key} for key in keys])


async def _links(tx: AsyncManagedTransaction, shape: tuple[str, ...], ops: Sequence[LinkNodes]) -> None:
    _, rel_type, source, target, each = shape
    identity = " {hash: r.hash}" if each == "each" else ""
    rows: list[Row] = [
        {
            "source": op.source.key,
            "target": op.target.key,
            "hash": op.cite.hash,
            "props": {**_given(op.properties), **_cite(op.cite)},
        }
        for op in ops
    ]
    await _run(
        tx,
        f"MERGE (a:{source} {{key: r.source}}) MERGE (b:{target} {{key: r.target}}) "
        f"MERGE (a)-[e:{rel_type}{identity}]->(b) SET e += r.props",
        rows,
    )


async def _stored(
    tx: AsyncManagedTransaction, label: str, keys: list[str], names: list[str]
) -> dict[str, Row]:
    """key -> {name: stored value} of the nodes of `label` among `keys`, each created bare if absent and
    write-locked until the transaction ends: another writer's transaction (a partition applying another
    session) cannot read the same run's count, or plan's version, before this one commits its own."""
    rows = await fetch(
        tx,
        f"UNWIND $keys AS k MERGE (n:{label} {{key: k}}) SET n.{LOCK} = true REMOVE n.{LOCK} "
        "RETURN k AS key, [p IN $names | n[p]] AS got",
        {"keys": list(dict.fromkeys(keys)), "names": names},
    )
    return {str(row["key"]): dict(zip(names, row["got"], strict=True)) for row in rows}


async def _revisions(tx: AsyncManagedTransaction, label: str, ops: Sequence[ReviseItem]) -> None:
    """Every revision kept; on the item, each property takes its latest value by `at` (ties: the last)."""
    names = sorted({f"{name}At" for op in ops for name in op.values})
    stored = await _stored(tx, label, [op.item.key for op in ops], names)
    rows: list[Row] = []
    for op in ops:
        latest = stored[op.item.key]
        winners: dict[str, Any] = {}
        for name, value in _given(op.values).items():
            known = latest.get(f"{name}At")
            if known is None or op.at >= known:
                winners[name] = value
                winners[f"{name}At"] = latest[f"{name}At"] = op.at
        revision = {
            "at": op.at,
            "values": json.dumps(_given(op.values), sort_keys=True),
            "item": op.item.key,
            "itemLabel": label,
            **_cite(op.cite),
        }
        key = f"{label}:{op.item.key}@{op.cite.session}/{op.cite.seq}"
        rows.append(
            {"key": op.item.key, "set": winners, "rev": key, "revision": revision, "cite": _cite(op.cite)}
        )
    await _run(
        tx,
        f"MERGE (n:{label} {{key: r.key}}) SET n += r.set "
        "MERGE (v:Revision {key: r.rev}) SET v += r.revision "
        "MERGE (n)-[h:HAS_REVISION]->(v) SET h += r.cite",
        rows,
    )


_SEQUENCE: Final = (
    "MERGE (run:WorkflowRun {key: r.run}) MERGE (m:Message {key: r.message}) "
    "SET m.position = r.position, run.messageCount = r.position, run.lastMessage = r.message "
    "WITH m, r WHERE r.previous IS NOT NULL "
    "MERGE (p:Message {key: r.previous}) MERGE (p)-[e:NEXT]->(m) SET e += r.cite"
)


async def _sequence(tx: AsyncManagedTransaction, ops: Sequence[SequenceMessage]) -> None:
    """Each message last in its run (`position` = count + 1, `NEXT` from the last); placed ones stay."""
    runs = await _stored(tx, "WorkflowRun", [op.run for op in ops], ["messageCount", "lastMessage"])
    placed = await _stored(tx, "Message", [op.message for op in ops], ["position"])
    rows: list[Row] = []
    for op in ops:
        if placed[op.message]["position"] is not None:
            continue
        run = runs[op.run]
        position = int(run["messageCount"] or 0) + 1
        rows.append(
            {
                "run": op.run,
                "message": op.message,
                "position": position,
                "previous": run["lastMessage"],
                "cite": _cite(op.cite),
            }
        )
        run["messageCount"], run["lastMessage"] = position, op.message
        placed[op.message]["position"] = position
    await _run(tx, _SEQUENCE, rows)


_VERSION: Final = (
    "MERGE (p:Message {key: r.plan}) SET p.version = r.version, p.originalVersion = r.original "
    "WITH p, r WHERE r.parent IS NOT NULL "
    "MERGE (q:Message {key: r.parent}) SET q.supersededBy = r.plan, q.current = false "
    "MERGE (p)-[e:PREVIOUS_VERSION]->(q) SET e += r.cite"
)


async def _versions(tx: AsyncManagedTransaction, ops: Sequence[VersionPlan]) -> None:
    """`version` = the parent's + 1 (a parent not yet versioned counts as 1), the lineage's original."""
    keys = [key for op in ops for key in (op.plan, op.parent) if key is not None]
    stored = await _stored(tx, "Message", keys, ["version", "originalVersion"])
    rows: list[Row] = []
    for op in ops:
        if op.parent is None:
            version, original = 1, op.plan
        else:
            parent = stored[op.parent]
            version = int(parent["version"] or 1) + 1
            original = parent["originalVersion"] or op.parent
        stored[op.plan].update(version=version, originalVersion=original)
        rows.append(
            {
                "plan": op.plan,
                "parent": op.parent,
                "version": version,
                "original": original,
                "cite": _cite(op.cite),
            }
        )
    await _run(tx, _VERSION, rows)


async def _statuses(tx: AsyncManagedTransaction, ops: Sequence[SetPlanStatus]) -> None:
    rows: list[Row] = [{"plan": op.plan, "status": op.status} for op in ops]
    await _run(tx, "MERGE (m:Message {key: r.plan}) SET m.status = r.status", rows)


async def _finishes(tx: AsyncManagedTransaction, ops: Sequence[FinishRun]) -> None:
    rows: list[Row] = [
        {"run": op.run, "status": op.status, "result": op.result, "at": op.cite.ts} for op in ops
    ]
    await _run(
        tx,
        "MERGE (n:WorkflowRun {key: r.run}) "
        "SET n.status = r.status, n.result = r.result, n.completedAt = r.at",
        rows,
    )


async def _group(tx: AsyncManagedTransaction, group: Group) -> None:
    kind, ops = group.shape[0], group.operations
    if kind == "upsert":
        await _upserts(tx, group.shape[1], [op for op in ops if isinstance(op, UpsertNode)])
    elif kind == "link":
        await _links(tx, group.shape, [op for op in ops if isinstance(op, LinkNodes)])
    elif kind == "revise":
        await _revisions(tx, group.shape[1], [op for op in ops if isinstance(op, ReviseItem)])
    elif kind == "sequence":
        await _sequence(tx, [op for op in ops if isinstance(op, SequenceMessage)])
    elif kind == "version":
        await _versions(tx, [op for op in ops if isinstance(op, VersionPlan)])
    elif kind == "status":
        await _statuses(tx, [op for op in ops if isinstance(op, SetPlanStatus)])
    else:
        await _finishes(tx, [op for op in ops if isinstance(op, FinishRun)])


async def write_operations(tx: AsyncManagedTransaction, operations: Sequence[Operation]) -> None:
    """Apply `operations` (a batch's, in order) inside `tx`, as their docstrings in `model` say."""
    for group in schedule(operations):
        await _group(tx, group)
