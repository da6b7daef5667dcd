"""Applying the workflow model's operations to LadybugDB, each exactly as its docstring in `model` says.

Labels and relationship types go into the Cypher text only from the closed sets of `model` (checked
against `ladybug_schema`), property names only from the schema's columns; every value is a parameter.
The caller holds the transaction: these functions only run statements through `execute`.
"""

from __future__ import annotations

import json
from typing import Any, Final, assert_never

from gateway.packs.workflow.ladybug_schema import COLUMNS, DENORMALIZED, LINKS_TABLE, PAIRS, REVISABLE
from gateway.packs.workflow.model import (
    Cite,
    FinishRun,
    LinkNodes,
    NodeLabel,
    Operation,
    ReviseItem,
    Scalar,
    SequenceMessage,
    SetPlanStatus,
    UpsertNode,
    VersionPlan,
)
from readmodels.graph.cypher.io import Execute

_LINK_PROPERTIES: Final = {"at", "verdict", "commentId", "message"}
_CITE: Final = "{0}.session = $session, {0}.seq = $seq, {0}.hash = $hash"


class WorkflowWriteError(ValueError):
    """An operation this store cannot write as given; the message names the field."""


def _cite(cite: Cite) -> dict[str, Any]:
    return {"session": cite.session, "seq": cite.seq, "hash": cite.hash}


def _checked(label: NodeLabel, name: str, value: Scalar | dict[str, Any]) -> Any:
    """`value` as the column `label.name` stores it (a dict as JSON text), or a clear error."""
    kind = COLUMNS[label].get(name)
    if kind is None and name != "id":
        raise WorkflowWriteError(
            f"{label}.{name}: no such property on LadybugDB (known: {sorted(COLUMNS[label])})"
        )
    if isinstance(value, dict):
        value = json.dumps(value, sort_keys=True, separators=(",", ":"))
    fits = {
        "INT64": isinstance(value, int) and not isinstance(value, bool),
        "BOOLEAN": isinstance(value, bool),
        "STRING[]": isinstance(value, list) and all(isinstance(item, str) for item in value),
    }.get(kind or "STRING", isinstance(value, str))
    if not fits:
        raise WorkflowWriteError(f"{label}.{name}: expected {kind or 'STRING'}, got {value!r}")
    return value


def upsert(execute: Execute, op: UpsertNode) -> None:
    label = op.node.label
    params: dict[str, Any] = {"key": op.node.key}
    sets: list[str] = []
    for index, (name, value) in enumerate(op.properties.items()):
        if value is None:
            continue
        params[f"p{index}"] = _checked(label, name, value)
        sets.append(f"n.`{name}` = $p{index}")
    if op.defines:
        params.update(_cite(op.cite))
        sets.append(_CITE.format("n"))
        if op.kind is not None:
            if label != "Message":
                raise WorkflowWriteError(f"{label}.kind: only a Message has a kind")
            params["kind"] = op.kind
            sets.append("n.kind = $kind")
    statement = f"MERGE (n:{label} {{key: $key}})"
    execute(f"{statement} SET {', '.join(sets)}" if sets else statement, params)


def link(execute: Execute, op: LinkNodes) -> None:
    source, target = op.source.label, op.target.label
    if (source, target) not in PAIRS[op.type]:
        raise WorkflowWriteError(f"{op.type}: no relationship from {source} to {target} on LadybugDB")
    params: dict[str, Any] = {"a": op.source.key, "b": op.target.key, **_cite(op.cite)}
    sets = [_CITE.format("r")]
    for index, (name, value) in enumerate(op.properties.items()):
        if name not in _LINK_PROPERTIES:
            raise WorkflowWriteError(f"{op.type}.{name}: no such relationship property on LadybugDB")
        if value is not None and not isinstance(value, str):
            raise WorkflowWriteError(f"{op.type}.{name}: expected STRING, got {value!r}")
        params[f"p{index}"] = value
        sets.append(f"r.`{name}` = $p{index}")
    nodes = f"MERGE (a:{source} {{key: $a}}) MERGE (b:{target} {{key: $b}})"
    column = DENORMALIZED.get(op.type)
    if column is not None:
        nodes += f" SET a.{column} = $b"
    if op.each_event:
        params["uid"] = f"{op.cite.session}/{op.cite.seq}"
        sets.append("r.uid = $uid")
    else:  # one per (type, source, target), remembered by its key in `LINKS_TABLE`
        params["link"] = f"{op.type}\x1f{source}:{op.source.key}\x1f{target}:{op.target.key}"
        if execute(f"MATCH (l:{LINKS_TABLE} {{key: $link}}) RETURN l.key AS key", {"link": params["link"]}):
            again = f"MATCH (a:{source} {{key: $a}})-[r:{op.type}]->(b:{target} {{key: $b}})"
            execute(f"{again} SET {', '.join(sets + ([f'a.{column} = $b'] if column else []))}", params)
            return
        nodes += f" CREATE (:{LINKS_TABLE} {{key: $link}})"
    # created, not merged: MERGE on a relationship scans its table (milliseconds, growing with the model)
    execute(f"{nodes} CREATE (a)-[r:{op.type}]->(b) SET {', '.join(sets)}", params)


def revise(execute: Execute, op: ReviseItem) -> None:
    label = op.item.label
    if label not in ("Issue", "PullRequest"):
        raise WorkflowWriteError(f"ReviseItem.item: only an Issue or a PullRequest is revised, not a {label}")
    given = {name: value for name, value in op.values.items() if value is not None}
    for name, value in given.items():
        if name not in REVISABLE:
            raise WorkflowWriteError(f"{label}.{name}: not a revisable property (known: {sorted(REVISABLE)})")
        _checked(label, name, value)
    revision = f"{label}:{op.item.key}@{op.cite.session}/{op.cite.seq}"
    execute(
        f"MERGE (n:{label} {{key: $key}}) MERGE (v:Revision {{key: $revision}}) "
        "SET v.id = $revision, v.item = $key, v.label = $label, v.at = $at, v.values = $values, "
        f"{_CITE.format('v')} MERGE (n)-[r:HAS_REVISION]->(v) SET r.at = $at, {_CITE.format('r')}",
        {
            "key": op.item.key,
            "revision": revision,
            "label": label,
            "at": op.at,
            "values": json.dumps(given, sort_keys=True, separators=(",", ":")),
            **_cite(op.cite),
        },
    )
    for name, value in given.items():
        execute(  # latest `at` wins; a tie goes to the revision applied last
            f"MATCH (n:{label} {{key: $key}}) WHERE n.`{name}At` IS NULL OR n.`{name}At` <= $at "
            f"SET n.`{name}` = $value, n.`{name}At` = $at",
            {"key": op.item.key, "at": op.at, "value": value},
        )


def sequence(execute: Execute, op: SequenceMessage) -> None:
    params = {"run": op.run, "m": op.message}
    found = execute(
        "MERGE (m:Message {key: $m}) MERGE (r:WorkflowRun {key: $run}) "
        "RETURN m.position AS position, r.messageCount AS count, r.lastMessage AS last",
        params,
    )[0]
    if found["position"] is not None:
        return  # a message already positioned is left where it is
    execute(
        "MATCH (m:Message {key: $m}), (r:WorkflowRun {key: $run}) "
        "SET m.position = $position, m.runId = $run, r.messageCount = $position, r.lastMessage = $m",
        {**params, "position": int(found["count"] or 0) + 1},
    )
    if found["last"] is not None:
        execute(
            "MATCH (a:Message {key: $a}), (b:Message {key: $b}) CREATE (a)-[r:NEXT]->(b) "
            f"SET r.at = $at, {_CITE.format('r')}",
            {"a": found["last"], "b": op.message, "at": op.cite.ts, **_cite(op.cite)},
        )


def version_plan(execute: Execute, op: VersionPlan) -> None:
    if op.parent is None:
        execute(
            "MERGE (p:Message {key: $plan}) SET p.version = 1, p.originalVersion = p.key",
            {"plan": op.plan},
        )
        return
    if op.parent == op.plan:
        raise WorkflowWriteError(f"VersionPlan.parent: plan {op.plan!r} cannot follow itself")
    execute(
        "MERGE (p:Message {key: $plan}) MERGE (q:Message {key: $parent}) "
        f"MERGE (p)-[r:PREVIOUS_VERSION]->(q) SET r.at = $at, {_CITE.format('r')}, "
        "p.version = coalesce(q.version, 0) + 1, p.originalVersion = coalesce(q.originalVersion, q.key), "
        "p.parentId = q.key, q.supersededBy = p.key, q.current = false",
        {"plan": op.plan, "parent": op.parent, "at": op.cite.ts, **_cite(op.cite)},
    )


def set_plan_status(execute: Execute, op: SetPlanStatus) -> None:
    execute("MERGE (p:Message {key: $plan}) SET p.status = $status", {"plan": op.plan, "status": op.status})


def finish_run(execute: Execute, op: FinishRun) -> None:
    params: dict[str, Any] = {"run": op.run, "status": op.status, "at": op.cite.ts}
    sets = "r.status = $status, r.completedAt = $at"
    if op.result is not None:
        params["result"] = op.result
        sets += ", r.result = $result"
    execute(f"MERGE (r:WorkflowRun {{key: $run}}) SET {sets}", params)


def apply_operation(execute: Execute, op: Operation) -> None:
    match op:
        case UpsertNode():
            upsert(execute, op)
        case LinkNodes():
            link(execute, op)
        case ReviseItem():
            revise(execute, op)
        case SequenceMessage():
            sequence(execute, op)
        case VersionPlan():
            version_plan(execute, op)
        case SetPlanStatus():
            set_plan_status(execute, op)
        case FinishRun():
            finish_run(execute, op)
        case _:
            assert_never(op)
