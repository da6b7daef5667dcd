"""LadybugDB reads before a batch (the `Snapshot`) and the batched writes of a `WritePlan`.

Every statement is parameterized and runs over a list of rows with `UNWIND`; endpoints are found with
separate `MATCH` clauses on primary keys (much faster on LadybugDB than the comma form). Values are
`CAST` to their column types because LadybugDB infers a parameter's type from its values, and a column
that is null in every row of a batch would otherwise be bound as the wrong type. The only text spliced
into a statement is a typed relationship label, and that comes from `identity.typed_label` alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from readmodels.graph.identity import checkpoint_uid, decode_json, event_uid, typed_label
from readmodels.graph.ladybug_reads import stored_edge_fields
from readmodels.graph.ladybug_schema import (
    AUDIT_FIELDS,
    CITATION_TYPES,
    EDGE_TYPES,
    ENTITY_TYPES,
    EVENT_TYPES,
    OBSERVATION_TABLES,
    OBSERVATION_TYPES,
    PROJECTED_RELATION_TYPES,
    Execute,
)
from readmodels.graph.plan import EdgeDemands, EntityRow, LoadRequest, RelationRow, Snapshot, WritePlan


def _cast_map(types: dict[str, str], var: str = "r") -> str:
    return ", ".join(f"{name}: CAST({var}.{name} AS {kind})" for name, kind in types.items())


def _returns(types: dict[str, str], var: str) -> str:
    return ", ".join(f"{var}.{name} AS {name}" for name in types)


ENTITY_RETURN = _returns(ENTITY_TYPES, "e")
EDGE_RETURN = (
    "a.uid AS source_uid, b.uid AS target_uid, a.name AS source_name, b.name AS target_name, "
    + _returns(EDGE_TYPES, "r")
)


def entity_from_row(row: dict[str, Any]) -> EntityRow:
    return EntityRow(
        uid=row["uid"],
        key=row["key"],
        session=row["session"],
        name=row["name"],
        entity_type=row["entity_type"],
        summary=row["summary"],
        properties=decode_json(row["properties"]),
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        version=row["version"],
        source_event_seq=row["source_event_seq"],
        source_event_hash=row["source_event_hash"],
        source_event_type=row["source_event_type"],
        source_thread=row["source_thread"],
    )


def edge_from_row(row: dict[str, Any]) -> RelationRow:
    return RelationRow(
        key=row["key"],
        triple=row["triple"],
        session=row["session"],
        relation_type=row["relation_type"],
        source_uid=row["source_uid"],
        target_uid=row["target_uid"],
        source_name=row["source_name"],
        target_name=row["target_name"],
        **stored_edge_fields(row),
        content=row["content"] or "",
        loaded_uid=row["uid"],
    )


def read_checkpoints(execute: Execute, projector: str, sessions: list[str]) -> dict[str, int]:
    if not sessions:
        return {}
    rows = execute(
        "UNWIND $ids AS id MATCH (c:Checkpoint {id: id}) RETURN c.session AS session, c.seq AS seq",
        {"ids": [checkpoint_uid(projector, session) for session in sessions]},
    )
    return {str(row["session"]): int(row["seq"]) for row in rows}


def load_snapshot(execute: Execute, request: LoadRequest) -> Snapshot:
    """Read the latest versions and names a batch touches, and open edges it names by `edge_id`."""
    snapshot = Snapshot()
    keys = dict.fromkeys(request.entity_keys)
    if request.name_keys:
        snapshot.names = {name: set() for name in request.name_keys}
        rows = execute(
            "MATCH (k:EntityKey) WHERE k.name_key IN $names RETURN k.name_key AS name_key, k.key AS key",
            {"names": request.name_keys},
        )
        for row in rows:
            snapshot.names[row["name_key"]].add(row["key"])
            keys[row["key"]] = None
    if keys:
        rows = execute(
            "UNWIND $keys AS key MATCH (k:EntityKey {key: key}) MATCH (e:Entity {uid: k.latest_uid}) "
            f"RETURN {ENTITY_RETURN}",
            {"keys": list(keys)},
        )
        snapshot.heads = {row["key"]: entity_from_row(row) for row in rows}
    if request.edge_ids:
        wanted = set(request.edge_ids)
        rows = execute(
            "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.valid_to IS NULL AND r.edge_id IN $ids "
            f"RETURN {EDGE_RETURN}",
            {"ids": sorted({edge_id for _, edge_id in wanted})},
        )
        snapshot.edge_id_edges = [
            edge_from_row(row) for row in rows if (row["session"], row["edge_id"]) in wanted
        ]
    return snapshot


def load_open_edges(execute: Execute, demands: EdgeDemands) -> list[RelationRow]:
    """The stored open edges a first resolution asked for: on closed versions, by key, by triple."""
    edges: list[RelationRow] = []
    uids = sorted(demands.entities)
    if uids:
        for pattern in (
            "MATCH (a:Entity {uid: uid}) MATCH (a)-[r:RELATES]->(b:Entity)",
            "MATCH (b:Entity {uid: uid}) MATCH (a:Entity)-[r:RELATES]->(b)",
        ):
            rows = execute(
                f"UNWIND $uids AS uid {pattern} WHERE r.valid_to IS NULL RETURN {EDGE_RETURN}", {"uids": uids}
            )
            edges.extend(edge_from_row(row) for row in rows)
    for field, wanted in (("key", demands.keys), ("triple", demands.triples)):
        pairs = [{"uid": uid, "value": value} for uid, value in sorted(wanted) if uid not in demands.entities]
        if pairs:
            rows = execute(
                "UNWIND $pairs AS p MATCH (a:Entity {uid: p.uid}) MATCH (a)-[r:RELATES]->(b:Entity) "
                f"WHERE r.valid_to IS NULL AND r.{field} = p.value RETURN {EDGE_RETURN}",
                {"pairs": pairs},
            )
            edges.extend(edge_from_row(row) for row in rows)
    return edges


def _run(execute: Execute, statement: str, rows: list[dict[str, Any]]) -> None:
    if rows:
        execute(statement, {"rows": rows})


def _by_label(edges: list[RelationRow]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for edge in edges:
        groups.setdefault(typed_label(edge.relation_type), []).append(edge.row())
    return groups


def write_plan(
    execute: Execute, plan: WritePlan, projector: str, ensure_typed: Callable[[str], None]
) -> None:
    """Write every row of `plan` (the caller holds the transaction)."""
    _write_spine(execute, plan)
    _run(
        execute,
        f"UNWIND $rows AS r CREATE (e:Entity {{{_cast_map(ENTITY_TYPES)}}})",
        [row.row() for row in plan.new_entities],
    )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (e:Entity {uid: r.uid}) SET e.valid_to = CAST(r.valid_to AS STRING)",
        [{"uid": row.uid, "valid_to": row.valid_to} for row in plan.closed_entities],
    )
    _run(
        execute,
        "UNWIND $rows AS r MERGE (k:EntityKey {key: r.key}) SET k.session = r.session, k.name = r.name, "
        "k.entity_type = r.entity_type, k.name_key = r.name_key, k.latest_uid = r.latest_uid, "
        "k.versions = CAST(r.versions AS INT64)",
        plan.entity_key_rows(),
    )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (o:Entity {uid: r.old}) MATCH (n:Entity {uid: r.new}) "
        "CREATE (o)-[:SUPERSEDED_BY {at: r.at}]->(n), (n)-[:PREVIOUS_VERSION {at: r.at}]->(o)",
        [{"old": old, "new": new, "at": at} for old, new, at in plan.version_links],
    )
    _write_edges(execute, plan, ensure_typed)
    _write_sources_and_observations(execute, plan)
    _run(
        execute,
        "UNWIND $rows AS r MERGE (c:Checkpoint {id: r.id}) SET c.projector = r.projector, "
        "c.session = r.session, c.seq = CAST(r.seq AS INT64), c.event_hash = r.hash",
        [
            {
                "id": checkpoint_uid(projector, session),
                "projector": projector,
                "session": session,
                "seq": seq,
                "hash": h,
            }
            for session, (seq, h) in plan.applied.items()
        ],
    )


def _write_spine(execute: Execute, plan: WritePlan) -> None:
    _run(
        execute,
        "UNWIND $rows AS r MERGE (s:Session {id: r.session}) "
        "ON CREATE SET s.first_seq = CAST(r.first_seq AS INT64), s.first_ts = r.first_ts, s.event_count = 0 "
        "SET s.last_seq = CAST(r.last_seq AS INT64), s.last_ts = r.last_ts, s.last_hash = r.last_hash, "
        "s.event_count = s.event_count + CAST(r.count AS INT64)",
        [
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
        ],
    )
    events: list[dict[str, Any]] = [
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
    _run(
        execute,
        "UNWIND $rows AS r MATCH (s:Session {id: r.session}) "
        f"CREATE (e:Event {{{_cast_map(EVENT_TYPES)}}}) CREATE (s)-[:HAS_EVENT]->(e)",
        events,
    )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (p:Event {uid: r.prev}) MATCH (e:Event {uid: r.uid}) "
        "CREATE (p)-[:NEXT_EVENT]->(e), (e)-[:PREVIOUS_EVENT]->(p)",
        [
            {"prev": event_uid(event.session, event.seq - 1), "uid": event_uid(event.session, event.seq)}
            for event in plan.events
            if event.seq > 1
        ],
    )


def _write_edges(execute: Execute, plan: WritePlan, ensure_typed: Callable[[str], None]) -> None:
    endpoints = "UNWIND $rows AS r MATCH (a:Entity {uid: r.source_uid}) MATCH (b:Entity {uid: r.target_uid}) "
    closed: dict[str, list[dict[str, Any]]] = {}
    for edge in plan.closed_relations:
        row = {
            "source_uid": edge.source_uid,
            "target_uid": edge.target_uid,
            "uid": edge.uid,
            "valid_to": edge.valid_to,
        }
        closed.setdefault("RELATES", []).append(row)
        closed.setdefault(typed_label(edge.relation_type), []).append(row)
    for label, rows in closed.items():
        _run(
            execute,
            f"{endpoints}MATCH (a)-[e:`{label}`]->(b) WHERE e.uid = r.uid "
            "SET e.valid_to = CAST(r.valid_to AS STRING)",
            rows,
        )
    properties = _cast_map(EDGE_TYPES)
    for label, rows in _by_label(plan.new_relations).items():
        ensure_typed(label)  # one statement writes both twins, so the rows cross into the engine once
        _run(
            execute,
            f"{endpoints}CREATE (a)-[:RELATES {{{properties}}}]->(b), (a)-[:`{label}` {{{properties}}}]->(b)",
            rows,
        )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (v:Event {uid: r.event_uid}) MATCH (e:Entity {uid: r.entity_uid}) "
        "CREATE (v)-[:PROJECTED_ENTITY {action: r.action}]->(e)",
        [
            {"event_uid": ev, "entity_uid": row.uid, "action": action}
            for ev, row, action in plan.projected_entities
        ],
    )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (v:Event {uid: r.event_uid}) MATCH (e:Entity {uid: r.source_uid}) "
        f"CREATE (v)-[:PROJECTED_RELATION {{{_cast_map(PROJECTED_RELATION_TYPES)}}}]->(e)",
        [_projected_relation_row(ev, edge, action) for ev, edge, action in plan.projected_relations],
    )


def _projected_relation_row(event: str, edge: RelationRow, action: str) -> dict[str, Any]:
    row = {name: getattr(edge, name) for name in AUDIT_FIELDS}
    row.update(
        event_uid=event,
        source_uid=edge.source_uid,
        target_uid=edge.target_uid,
        uid=edge.uid,
        relation_type=edge.relation_type,
        action=action,
        valid_from=edge.valid_from,
        valid_to=edge.valid_to,
    )
    return row


def _write_sources_and_observations(execute: Execute, plan: WritePlan) -> None:
    _run(
        execute,
        "UNWIND $rows AS r MERGE (s:Source {uid: r.uid}) ON CREATE SET s.session = r.session, "
        "s.path = r.path, s.line_start = CAST(r.line_start AS INT64), "
        "s.line_end = CAST(r.line_end AS INT64), s.checksum = CAST(r.checksum AS STRING), "
        "s.text = CAST(r.text AS STRING)",
        list(plan.sources.values()),
    )
    cites = _cast_map(CITATION_TYPES)
    _run(
        execute,
        "UNWIND $rows AS r MATCH (v:Event {uid: r.event_uid}) MATCH (s:Source {uid: r.source_uid}) "
        f"CREATE (v)-[:CITES_SOURCE {{{cites}}}]->(s)",
        plan.event_citations,
    )
    _run(
        execute,
        "UNWIND $rows AS r MATCH (e:Entity {uid: r.entity_uid}) MATCH (s:Source {uid: r.source_uid}) "
        f"CREATE (e)-[:CITES_SOURCE {{{cites}}}]->(s)",
        [{**cite, "entity_uid": row.uid} for row, cite in plan.entity_citations],
    )
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for row, observation in plan.observations:
        by_kind.setdefault(observation["kind"], []).append({**observation, "entity_uid": row.uid})
    for kind, rows in by_kind.items():
        if kind not in OBSERVATION_TABLES:
            raise ValueError(f"unknown observation kind {kind!r}")
        _run(
            execute,
            "UNWIND $rows AS r MATCH (t:Entity {uid: r.entity_uid}) MATCH (v:Event {uid: r.event_uid}) "
            f"CREATE (t)-[:{kind} {{{_cast_map(OBSERVATION_TYPES)}}}]->(v)",
            rows,
        )
