"""The tables a bulk load fills, their column layouts, and the rows of a plan for each (any backend).

LadybugDB's `COPY` maps columns by position, so each target lists its columns in the table's own property
order (a relationship table's first two are the `from` and `to` primary keys); tests/test_graph_bulk.py
checks every layout against `CALL table_info`. The rows come from the same builders as the incremental writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any, NamedTuple

import pyarrow as pa

from readmodels.graph.arrow_types import ARROW_TYPES
from readmodels.graph.identity import encode_json, event_uid, typed_label
from readmodels.graph.plan import RelationRow, WritePlan
from readmodels.graph.properties import (
    CITATION_TYPES,
    EDGE_TYPES,
    ENTITY_KEY_TYPES,
    ENTITY_TYPES,
    EVENT_TYPES,
    OBSERVATION_TABLES,
    OBSERVATION_TYPES,
    PROJECTED_RELATION_TYPES,
    SOURCE_TYPES,
)
from readmodels.graph.writes import checkpoint_rows, session_rows

ENDS = {"from": "STRING", "to": "STRING"}


class CopyTarget(NamedTuple):
    """One `COPY` destination: a table (and, for a table joining several pairs, which pair)."""

    table: str
    columns: tuple[tuple[str, str], ...]  # (name, column type), in the table's property order
    node: bool = False
    pair: tuple[str, str] | None = None  # (FROM, TO) node tables, for relationship tables with several
    typed: str | None = None  # set for a typed relationship table, created on demand

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([(name, ARROW_TYPES[kind]) for name, kind in self.columns])


def _node(table: str, columns: Mapping[str, str]) -> CopyTarget:
    return CopyTarget(table, tuple(columns.items()), node=True)


def _rel(table: str, columns: Mapping[str, str] | None = None, **kwargs: Any) -> CopyTarget:
    return CopyTarget(table, tuple({**ENDS, **(columns or {})}.items()), **kwargs)


SESSION = _node(
    "Session",
    {
        "id": "STRING",
        "first_seq": "INT64",
        "first_ts": "STRING",
        "last_seq": "INT64",
        "last_ts": "STRING",
        "last_hash": "STRING",
        "event_count": "INT64",
    },
)
EVENT = _node("Event", EVENT_TYPES)
ENTITY = _node("Entity", ENTITY_TYPES)
ENTITY_KEY = _node("EntityKey", ENTITY_KEY_TYPES)
SOURCE = _node("Source", SOURCE_TYPES)
CHECKPOINT = _node(
    "Checkpoint",
    {"id": "STRING", "projector": "STRING", "session": "STRING", "seq": "INT64", "event_hash": "STRING"},
)
HAS_EVENT = _rel("HAS_EVENT")
NEXT_EVENT = _rel("NEXT_EVENT")
PREVIOUS_EVENT = _rel("PREVIOUS_EVENT")
SUPERSEDED_BY = _rel("SUPERSEDED_BY", {"at": "STRING"})
PREVIOUS_VERSION = _rel("PREVIOUS_VERSION", {"at": "STRING"})
RELATES = _rel("RELATES", EDGE_TYPES)
PROJECTED_ENTITY = _rel("PROJECTED_ENTITY", {"action": "STRING"})
PROJECTED_RELATION = _rel("PROJECTED_RELATION", PROJECTED_RELATION_TYPES)
HAS_VERSION = _rel("HAS_VERSION")
EVENT_CITES = _rel("CITES_SOURCE", CITATION_TYPES, pair=("Event", "Source"))
ENTITY_CITES = _rel("CITES_SOURCE", CITATION_TYPES, pair=("Entity", "Source"))
OBSERVATIONS = {kind: _rel(kind, OBSERVATION_TYPES) for kind in OBSERVATION_TABLES}


@cache
def typed_relation(label: str) -> CopyTarget:
    """The target of a typed relationship table; `label` must come from `identity.typed_label`."""
    return _rel(label, EDGE_TYPES, typed=label)


def copy_order(target: CopyTarget) -> tuple[bool, bool, str, tuple[str, str] | None]:
    """Sort key: node tables before the relationship tables that point at them, checkpoints last (a
    load that stops half-way has none, so it can never pass for a complete one). By value: the targets a
    load sorts come decoded from the workers' reports, never the very objects defined here."""
    return (target == CHECKPOINT, not target.node, target.table, target.pair)


def copy_tables(plan: WritePlan, projector: str) -> dict[CopyTarget, pa.Table]:
    """Every row of `plan` as one Arrow table per `COPY` target (empty targets are left out)."""
    tables = {
        target: pa.Table.from_pylist(rows, schema=target.schema)
        for target, rows in _dict_rows(plan, projector).items()
        if rows
    }
    if plan.events:
        tables.update(_spine_tables(plan))
    if plan.new_relations:
        tables.update(_edge_tables(plan.new_relations))
    if plan.projected_relations:
        tables[PROJECTED_RELATION] = _projected_relation_table(plan)
    return tables


def _spine_tables(plan: WritePlan) -> dict[CopyTarget, pa.Table]:
    """`Event` nodes and their links, column by column: one of each per event."""
    events = plan.events
    uids = [event_uid(event.session, event.seq) for event in events]
    columns: dict[str, list[Any]] = {"uid": uids}
    for name in EVENT_TYPES:
        if name == "caused_by":
            columns[name] = [list(event.caused_by) for event in events]
        elif name != "uid":
            columns[name] = [getattr(event, name) for event in events]
    links = [(event_uid(event.session, event.seq - 1), uid) for event, uid in zip(events, uids, strict=True)]
    links = [link for link, event in zip(links, events, strict=True) if event.seq > 1]
    previous, following = [link[0] for link in links], [link[1] for link in links]
    return {
        EVENT: pa.table(columns, schema=EVENT.schema),
        HAS_EVENT: pa.table({"from": [e.session for e in events], "to": uids}, schema=HAS_EVENT.schema),
        NEXT_EVENT: pa.table({"from": previous, "to": following}, schema=NEXT_EVENT.schema),
        PREVIOUS_EVENT: pa.table({"from": following, "to": previous}, schema=PREVIOUS_EVENT.schema),
    }


def _projected_relation_table(plan: WritePlan) -> pa.Table:
    items = plan.projected_relations
    columns: dict[str, list[Any]] = {
        "from": [event for event, _, _ in items],
        "to": [edge.source_key for _, edge, _ in items],
        "action": [action for _, _, action in items],
    }
    for name, _ in PROJECTED_RELATION.columns[2:]:
        if name != "action":
            columns[name] = [getattr(edge, name) for _, edge, _ in items]
    return pa.table(columns, schema=PROJECTED_RELATION.schema)


def _edge_tables(edges: list[RelationRow]) -> dict[CopyTarget, pa.Table]:
    """`RELATES` and the typed twins, built column by column (they are most of a graph's rows)."""
    columns: dict[str, list[Any]] = {
        "from": [edge.source_key for edge in edges],
        "to": [edge.target_key for edge in edges],
    }
    for name in EDGE_TYPES:
        if name == "properties":
            columns[name] = [encode_json(edge.properties) for edge in edges]
        else:
            columns[name] = [getattr(edge, name) for edge in edges]
    relates = pa.table(columns, schema=RELATES.schema)
    by_label: dict[str, list[int]] = {}
    for index, edge in enumerate(edges):
        by_label.setdefault(typed_label(edge.relation_type), []).append(index)
    tables = {RELATES: relates}
    for label, indices in by_label.items():
        tables[typed_relation(label)] = relates.take(pa.array(indices, pa.int64()))
    return tables


def _dict_rows(plan: WritePlan, projector: str) -> dict[CopyTarget, list[dict[str, Any]]]:
    targets: dict[CopyTarget, list[dict[str, Any]]] = {
        SESSION: [{**row, "id": row["session"], "event_count": row["count"]} for row in session_rows(plan)],
        ENTITY: [row.row() for row in plan.new_entities],
        ENTITY_KEY: plan.entity_key_rows(),
        HAS_VERSION: [{"from": row.key, "to": row.uid} for row in plan.new_entities],
        SUPERSEDED_BY: [{"from": old, "to": new, "at": at} for old, new, at in plan.version_links],
        PREVIOUS_VERSION: [{"from": new, "to": old, "at": at} for old, new, at in plan.version_links],
        PROJECTED_ENTITY: [
            {"from": event, "to": row.uid, "action": action} for event, row, action in plan.projected_entities
        ],
        SOURCE: list(plan.sources.values()),
        EVENT_CITES: [
            {**cite, "from": cite["event_uid"], "to": cite["source_uid"]} for cite in plan.event_citations
        ],
        ENTITY_CITES: [
            {**cite, "from": row.uid, "to": cite["source_uid"]} for row, cite in plan.entity_citations
        ],
        CHECKPOINT: [{**row, "event_hash": row["hash"]} for row in checkpoint_rows(plan, projector)],
    }
    for task, observation in plan.observations:
        target = OBSERVATIONS.get(observation["kind"])
        if target is None:
            raise ValueError(f"unknown observation kind {observation['kind']!r}")
        targets.setdefault(target, []).append(
            {**observation, "from": task.uid, "to": observation["event_uid"]}
        )
    return targets
