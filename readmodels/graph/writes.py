"""The writes of a `WritePlan`, once for every backend: a sequence of `WriteStep`s.

A step is one parameterized statement applied to every row of a batch, each row bound as `r`: LadybugDB
runs it as `LOAD FROM $rows <statement>` over an Arrow table (`readmodels.embedded.graph_writes`), Neo4j as
`UNWIND $rows AS r <statement>` (`neo4j_writes`). Endpoints are found with separate `MATCH` clauses on
primary keys (much faster on LadybugDB than the comma form, the same on Neo4j). The only text spliced
into a statement is a relationship label, and that comes from `identity.typed_label` or the schema's
fixed observation kinds alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec

from readmodels.graph.identity import checkpoint_uid, event_uid, typed_label
from readmodels.graph.plan import RelationRow, WritePlan
from readmodels.graph.properties import (
    AUDIT_FIELDS,
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

ENDPOINTS: Final = {"source_key": "STRING", "target_key": "STRING"}
SESSION_ROW: Final = {
    "session": "STRING",
    "first_seq": "INT64",
    "first_ts": "STRING",
    "last_seq": "INT64",
    "last_ts": "STRING",
    "last_hash": "STRING",
    "count": "INT64",
}
CHECKPOINT_ROW: Final = {
    "id": "STRING",
    "projector": "STRING",
    "session": "STRING",
    "seq": "INT64",
    "hash": "STRING",
}
CLOSED_ROW: Final = {"uid": "STRING", "valid_to": "STRING"}


def _props(types: Mapping[str, str]) -> str:
    return ", ".join(f"{name}: r.{name}" for name in types)


class WriteStep(msgspec.Struct, frozen=True, kw_only=True):
    """One statement over rows bound as `r`; `types` declares each column (see `properties`)."""

    statement: str
    types: Mapping[str, str]
    rows: list[dict[str, Any]]
    typed_label: str | None = None
    """A typed relationship label the statement creates (LadybugDB must create its table first)."""


def _step(statement: str, types: Mapping[str, str], rows: list[dict[str, Any]]) -> Iterator[WriteStep]:
    if rows:
        yield WriteStep(statement=statement, types=types, rows=rows)


def _by_label(edges: list[RelationRow]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for edge in edges:
        groups.setdefault(typed_label(edge.relation_type), []).append(edge.row())
    return groups


def write_steps(plan: WritePlan, projector: str) -> Iterator[WriteStep]:
    """Every write of `plan`, in an order where each step finds the nodes it links (one transaction)."""
    yield from _spine_steps(plan)
    yield from _step(
        f"CREATE (e:Entity {{{_props(ENTITY_TYPES)}}})",
        ENTITY_TYPES,
        [row.row() for row in plan.new_entities],
    )
    yield from _step(
        "MATCH (e:Entity {uid: r.uid}) SET e.valid_to = r.valid_to",
        CLOSED_ROW,
        [{"uid": row.uid, "valid_to": row.valid_to} for row in plan.closed_entities],
    )
    keys = plan.entity_key_rows()
    yield from _step(  # a key this batch made needs no lookup
        f"CREATE (k:EntityKey {{{_props(ENTITY_KEY_TYPES)}}})",
        ENTITY_KEY_TYPES,
        [row for row in keys if row["key"] in plan.new_keys],
    )
    yield from _step(
        "MATCH (k:EntityKey {key: r.key}) SET k.latest_uid = r.latest_uid, k.versions = r.versions",
        ENTITY_KEY_TYPES,
        [row for row in keys if row["key"] not in plan.new_keys],
    )
    yield from _step(
        "MATCH (k:EntityKey {key: r.key}) MATCH (e:Entity {uid: r.uid}) CREATE (k)-[:HAS_VERSION]->(e)",
        {"key": "STRING", "uid": "STRING"},
        [{"key": row.key, "uid": row.uid} for row in plan.new_entities],
    )
    yield from _step(
        "MATCH (o:Entity {uid: r.old}) MATCH (n:Entity {uid: r.new}) "
        "CREATE (o)-[:SUPERSEDED_BY {at: r.at}]->(n), (n)-[:PREVIOUS_VERSION {at: r.at}]->(o)",
        {"old": "STRING", "new": "STRING", "at": "STRING"},
        [{"old": old, "new": new, "at": at} for old, new, at in plan.version_links],
    )
    yield from _edge_steps(plan)
    yield from _source_and_observation_steps(plan)
    yield from _step(
        "MERGE (c:Checkpoint {id: r.id}) SET c.projector = r.projector, c.session = r.session, "
        "c.seq = r.seq, c.event_hash = r.hash",
        CHECKPOINT_ROW,
        checkpoint_rows(plan, projector),
    )


def checkpoint_rows(plan: WritePlan, projector: str) -> list[dict[str, Any]]:
    return [
        {
            "id": checkpoint_uid(projector, session),
            "projector": projector,
            "session": session,
            "seq": seq,
            "hash": h,
        }
        for session, (seq, h) in plan.applied.items()
    ]


def _spine_steps(plan: WritePlan) -> Iterator[WriteStep]:
    yield from _step(
        "MERGE (s:Session {id: r.session}) "
        "ON CREATE SET s.first_seq = r.first_seq, s.first_ts = r.first_ts, s.event_count = 0 "
        "SET s.last_seq = r.last_seq, s.last_ts = r.last_ts, s.last_hash = r.last_hash, "
        "s.event_count = s.event_count + r.count",
        SESSION_ROW,
        session_rows(plan),
    )
    yield from _step(
        f"MATCH (s:Session {{id: r.session}}) CREATE (e:Event {{{_props(EVENT_TYPES)}}}) "
        "CREATE (s)-[:HAS_EVENT]->(e)",
        EVENT_TYPES,
        _event_rows(plan),
    )
    yield from _step(
        "MATCH (p:Event {uid: r.prev}) MATCH (e:Event {uid: r.uid}) "
        "CREATE (p)-[:NEXT_EVENT]->(e), (e)-[:PREVIOUS_EVENT]->(p)",
        {"prev": "STRING", "uid": "STRING"},
        _spine_link_rows(plan),
    )


def session_rows(plan: WritePlan) -> list[dict[str, Any]]:
    return [
        {
            "session": row.session,
            "first_seq": row.first_seq,
            "first_ts": row.first_ts,
            "last_seq": row.last_seq,
            "last_ts": row.last_ts,
            "last_hash": row.last_hash,
            "count": row.count,
        }
        for row in plan.sessions.values()
    ]


def _event_rows(plan: WritePlan) -> list[dict[str, Any]]:
    return [
        {
            "uid": event_uid(event.session, event.seq),
            "session": event.session,
            "seq": event.seq,
            "hash": event.hash,
            "prev_hash": event.prev_hash,
            "type": event.type,
            "ts": event.ts,
            "actor": event.actor,
            "summary": event.summary,
            "citation": event.citation,
            "caused_by": list(event.caused_by),
        }
        for event in plan.events
    ]


def _spine_link_rows(plan: WritePlan) -> list[dict[str, Any]]:
    """(previous event, event) of every event after a session's first."""
    return [
        {"prev": event_uid(event.session, event.seq - 1), "uid": event_uid(event.session, event.seq)}
        for event in plan.events
        if event.seq > 1
    ]


def _edge_steps(plan: WritePlan) -> Iterator[WriteStep]:
    endpoints = "MATCH (a:EntityKey {key: r.source_key}) MATCH (b:EntityKey {key: r.target_key}) "
    closed: dict[str, list[dict[str, Any]]] = {}
    for edge in plan.closed_relations:
        row = {
            "source_key": edge.source_key,
            "target_key": edge.target_key,
            "uid": edge.uid,
            "valid_to": edge.valid_to,
        }
        closed.setdefault("RELATES", []).append(row)
        closed.setdefault(typed_label(edge.relation_type), []).append(row)
    for label, rows in closed.items():
        yield from _step(
            # from the source alone, in one pattern with an unlabeled target: a target (a team, say) collects
            # incoming edges from every entity pointing at it, and both a bound target and a second MATCH
            # make the planner join against whole-table scans (2.3x slower at 100k edges)
            f"MATCH (a:EntityKey {{key: r.source_key}})-[e:`{label}`]->() WHERE e.uid = r.uid "
            "SET e.valid_to = r.valid_to",
            {**ENDPOINTS, **CLOSED_ROW},
            rows,
        )
    properties = _props(EDGE_TYPES)
    for label, rows in _by_label(plan.new_relations).items():
        yield WriteStep(  # one statement writes both twins, so the rows cross into the engine once
            statement=f"{endpoints}CREATE (a)-[:RELATES {{{properties}}}]->(b), "
            f"(a)-[:`{label}` {{{properties}}}]->(b)",
            types={**ENDPOINTS, **EDGE_TYPES},
            rows=rows,
            typed_label=label,
        )
    yield from _step(
        "MATCH (v:Event {uid: r.event_uid}) MATCH (e:Entity {uid: r.entity_uid}) "
        "CREATE (v)-[:PROJECTED_ENTITY {action: r.action}]->(e)",
        {"event_uid": "STRING", "entity_uid": "STRING", "action": "STRING"},
        [
            {"event_uid": ev, "entity_uid": row.uid, "action": action}
            for ev, row, action in plan.projected_entities
        ],
    )
    yield from _step(
        "MATCH (v:Event {uid: r.event_uid}) MATCH (k:EntityKey {key: r.source_key}) "
        f"CREATE (v)-[:PROJECTED_RELATION {{{_props(PROJECTED_RELATION_TYPES)}}}]->(k)",
        {"event_uid": "STRING", "source_key": "STRING", **PROJECTED_RELATION_TYPES},
        [_projected_relation_row(ev, edge, action) for ev, edge, action in plan.projected_relations],
    )


def _projected_relation_row(event: str, edge: RelationRow, action: str) -> dict[str, Any]:
    row = {name: getattr(edge, name) for name in AUDIT_FIELDS}
    row.update(
        event_uid=event,
        source_key=edge.source_key,
        target_key=edge.target_key,
        uid=edge.uid,
        relation_type=edge.relation_type,
        action=action,
        valid_from=edge.valid_from,
        valid_to=edge.valid_to,
    )
    return row


def _source_and_observation_steps(plan: WritePlan) -> Iterator[WriteStep]:
    yield from _step(
        "MERGE (s:Source {uid: r.uid}) ON CREATE SET s.session = r.session, s.path = r.path, "
        "s.line_start = r.line_start, s.line_end = r.line_end, s.checksum = r.checksum, s.text = r.text",
        SOURCE_TYPES,
        list(plan.sources.values()),
    )
    cites = _props(CITATION_TYPES)
    yield from _step(
        "MATCH (v:Event {uid: r.event_uid}) MATCH (s:Source {uid: r.source_uid}) "
        f"CREATE (v)-[:CITES_SOURCE {{{cites}}}]->(s)",
        {"event_uid": "STRING", "source_uid": "STRING", **CITATION_TYPES},
        plan.event_citations,
    )
    yield from _step(
        "MATCH (e:Entity {uid: r.entity_uid}) MATCH (s:Source {uid: r.source_uid}) "
        f"CREATE (e)-[:CITES_SOURCE {{{cites}}}]->(s)",
        {"entity_uid": "STRING", "source_uid": "STRING", **CITATION_TYPES},
        [{**cite, "entity_uid": row.uid} for row, cite in plan.entity_citations],
    )
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row, observation in plan.observations:
        by_kind.setdefault(observation["kind"], []).append({**observation, "entity_uid": row.uid})
    for kind, rows in by_kind.items():
        if kind not in OBSERVATION_TABLES:
            raise ValueError(f"unknown observation kind {kind!r}")
        yield from _step(
            "MATCH (t:Entity {uid: r.entity_uid}) MATCH (v:Event {uid: r.event_uid}) "
            f"CREATE (t)-[:{kind} {{{_props(OBSERVATION_TYPES)}}}]->(v)",
            {"entity_uid": "STRING", "event_uid": "STRING", **OBSERVATION_TYPES},
            rows,
        )
