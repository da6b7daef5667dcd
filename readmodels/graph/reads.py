"""The typed reads of `GraphStore`, once for every backend (portable Cypher: `readmodels.graph.cypher.io`).

Each read is a generator: it yields its statements and is sent their rows. The one dialect difference,
the function naming a relationship's type, is a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from readmodels.graph.cypher.io import PerKey, Reading
from readmodels.graph.identity import decode_json, entity_key
from readmodels.graph.model import canonical_ts
from readmodels.graph.properties import EDGE_TYPES, ENTITY_TYPES, OBSERVATION_TABLES
from readmodels.graph.records import (
    EntityVersion,
    EventRecord,
    Neighbour,
    ObservationRecord,
    RelationEdge,
    SourceCitationRecord,
)

ENTITY_COLUMNS = ", ".join(f"e.{name} AS {name}" for name in ENTITY_TYPES)
EDGE_COLUMNS = (  # an edge (`r`) and the entities it joins (`a` to `b`, `EntityKey` nodes): `to_edge`
    "a.key AS a_key, a.name AS a_name, a.entity_type AS a_type, "
    "b.key AS b_key, b.name AS b_name, b.entity_type AS b_type, "
    + ", ".join(f"r.{name} AS {name}" for name in EDGE_TYPES)
)
RELATIONS_OF_EACH_KEY = (  # a `PerKey` entity's relations, both ways: (pattern, the other end's variable)
    ("(a:EntityKey {key: $each_key})-[r:RELATES]->(b:EntityKey)", "b"),
    ("(a:EntityKey)-[r:RELATES]->(b:EntityKey {key: $each_key})", "a"),
)
_EVENT_COLUMNS = ", ".join(
    f"e.{name} AS {name}"
    for name in (
        "session",
        "seq",
        "hash",
        "prev_hash",
        "type",
        "ts",
        "actor",
        "summary",
        "citation",
        "caused_by",
    )
)


def window(var: str, as_of: str | None, params: dict[str, Any]) -> str:
    """The Cypher condition 'current at as_of' for `var` (`as_of` None: still open)."""
    if as_of is None:
        return f"{var}.valid_to IS NULL"
    params["as_of"] = canonical_ts(as_of)
    return f"{var}.valid_from <= $as_of AND ({var}.valid_to IS NULL OR {var}.valid_to > $as_of)"


def to_version(row: dict[str, Any], prefix: str = "") -> EntityVersion:
    return EntityVersion(
        uid=row[prefix + "uid"],
        session=row[prefix + "session"],
        name=row[prefix + "name"],
        entity_type=row[prefix + "entity_type"],
        summary=row[prefix + "summary"],
        properties=decode_json(row[prefix + "properties"]),
        valid_from=row[prefix + "valid_from"],
        valid_to=row[prefix + "valid_to"],
        version=row[prefix + "version"],
        source_event_seq=row[prefix + "source_event_seq"],
        source_event_hash=row[prefix + "source_event_hash"],
        source_event_type=row[prefix + "source_event_type"],
        source_thread=row[prefix + "source_thread"],
    )


def stored_edge_fields(row: dict[str, Any]) -> dict[str, Any]:
    """The properties every stored edge carries (window, provenance, audit), decoded from a result row."""
    return {
        "properties": decode_json(row["properties"]),
        "valid_from": row["valid_from"],
        "valid_to": row["valid_to"],
        "source_event_seq": row["source_event_seq"],
        "source_event_hash": row["source_event_hash"],
        "source_event_type": row["source_event_type"],
        "source_thread": row["source_thread"],
        "inferred": bool(row["inferred"]),
        "confidence": row["confidence"],
        "inference_method": row["inference_method"],
        "evidence_event_hashes": list(row["evidence_event_hashes"] or []),
        "evidence_event_seqs": list(row["evidence_event_seqs"] or []),
        "evidence_citations": list(row["evidence_citations"] or []),
        "evidence_quotes": list(row["evidence_quotes"] or []),
        "edge_id": row["edge_id"],
        "review_status": row["review_status"],
        "authority_status": row["authority_status"],
        "derived_from_event_seq": row["derived_from_event_seq"],
        "derived_from_event_hash": row["derived_from_event_hash"],
    }


def to_edge(row: dict[str, Any]) -> RelationEdge:
    return RelationEdge(
        uid=row["uid"],
        session=row["session"],
        relation_type=row["relation_type"],
        source_key=row["a_key"],
        source_name=row["a_name"],
        source_entity_type=row["a_type"],
        target_key=row["b_key"],
        target_name=row["b_name"],
        target_entity_type=row["b_type"],
        **stored_edge_fields(row),
    )


def events(session: str, from_seq: int, limit: int | None) -> Reading[list[EventRecord]]:
    params: dict[str, Any] = {"session": session, "from_seq": from_seq}
    tail = ""
    if limit is not None:
        params["limit"] = limit
        tail = " LIMIT $limit"
    rows = yield (
        "MATCH (s:Session {id: $session}) MATCH (s)-[:HAS_EVENT]->(e:Event) WHERE e.seq >= $from_seq "
        f"RETURN {_EVENT_COLUMNS} ORDER BY e.seq{tail}",
        params,
    )
    return [EventRecord(**{**row, "caused_by": list(row["caused_by"] or [])}) for row in rows]


def entity_versions(session: str, name: str, entity_type: str) -> Reading[list[EntityVersion]]:
    rows = yield (
        f"MATCH (e:Entity) WHERE e.key = $key RETURN {ENTITY_COLUMNS} ORDER BY e.valid_from",
        {"key": entity_key(session, name, entity_type)},
    )
    return [to_version(row) for row in rows]


def entities(session: str, as_of: str | None, entity_type: str | None) -> Reading[list[EntityVersion]]:
    params: dict[str, Any] = {"session": session}
    conditions = ["e.session = $session", window("e", as_of, params)]
    if entity_type is not None:
        params["entity_type"] = entity_type
        conditions.append("e.entity_type = $entity_type")
    rows = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN {ENTITY_COLUMNS} "
        "ORDER BY e.entity_type, e.name",
        params,
    )
    return [to_version(row) for row in rows]


def _edge_filters(
    params: dict[str, Any], as_of: str | None, include_inferred: bool, relation_type: str | None
) -> list[str]:
    conditions = [window("r", as_of, params)]
    if not include_inferred:
        conditions.append("r.inferred = false")
    if relation_type is not None:
        params["relation_type"] = relation_type
        conditions.append("r.relation_type = $relation_type")
    return conditions


def relations(
    session: str, as_of: str | None, include_inferred: bool, relation_type: str | None
) -> Reading[list[RelationEdge]]:
    params: dict[str, Any] = {"session": session}
    conditions = ["r.session = $session", *_edge_filters(params, as_of, include_inferred, relation_type)]
    rows = yield (
        f"MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE {' AND '.join(conditions)} "
        f"RETURN {EDGE_COLUMNS} "
        "ORDER BY r.relation_type, a.name, b.name, r.valid_from",
        params,
    )
    return [to_edge(row) for row in rows]


def keys_of(uids: list[str]) -> Reading[dict[str, str]]:
    """The entity (`identity.entity_key`) of each of the versions `uids` that exists."""
    if not uids:
        return {}
    rows = yield PerKey("MATCH (e:Entity {uid: $each_key}) RETURN e.uid AS uid, e.key AS key", uids, {})
    return {row["uid"]: row["key"] for row in rows}


def latest_rows(keys: Sequence[str]) -> Reading[list[dict[str, Any]]]:
    """The latest version (open or closed) of each entity `keys` that exists: `ENTITY_COLUMNS` and
    `versions`, the entity's count of versions.

    One statement over every key: run once per key (`PerKey`), LadybugDB reads the whole `Entity` table
    for each to follow `k.latest_uid` (60 keys: 331 ms at 20,000 events), unwound it seeks (1 ms)."""
    if not keys:
        return []
    rows: list[dict[str, Any]] = yield (
        "UNWIND $keys AS key MATCH (k:EntityKey {key: key}) MATCH (e:Entity {uid: k.latest_uid}) "
        f"RETURN k.versions AS versions, {ENTITY_COLUMNS}",
        {"keys": sorted(set(keys))},
    )
    return rows


def versions_at(keys: Sequence[str], as_of: str | None) -> Reading[dict[str, EntityVersion]]:
    """The version of each entity `keys` that holds at `as_of` (`None`: its open one), where there is one."""
    if not keys:
        return {}
    if as_of is None:
        latest = yield from latest_rows(keys)
        return {row["key"]: to_version(row) for row in latest if row["valid_to"] is None}
    params: dict[str, Any] = {}
    rows = yield PerKey(
        "MATCH (k:EntityKey {key: $each_key})-[:HAS_VERSION]->(e:Entity) "
        f"WHERE {window('e', as_of, params)} RETURN {ENTITY_COLUMNS}",
        sorted(set(keys)),
        params,
    )
    return {row["key"]: to_version(row) for row in rows}


def expand(
    uids: list[str], depth: int, as_of: str | None, include_inferred: bool, fanout: int | None = None
) -> Reading[list[Neighbour]]:
    """The entities within `depth` hops (either direction) of the versions `uids`' entities, nearest first,
    each as its version at `as_of`.

    `fanout` caps the edges read per entity, direction and hop, so a hub costs no more than a leaf."""
    cap = "" if fanout is None else f" LIMIT {int(fanout)}"
    seen = set((yield from keys_of(sorted(set(uids)))).values())
    frontier = sorted(seen)
    levels: list[dict[str, RelationEdge]] = []
    edge_params: dict[str, Any] = {}
    edge_conditions = " AND ".join(_edge_filters(edge_params, as_of, include_inferred, None))
    for _ in range(depth):
        if not frontier:
            break
        reached: dict[str, RelationEdge] = {}
        for pattern, other in RELATIONS_OF_EACH_KEY:
            rows = yield PerKey(
                f"MATCH {pattern} WHERE {edge_conditions} RETURN {EDGE_COLUMNS}, {other}.key AS o_key{cap}",
                frontier,
                edge_params,
            )
            for row in rows:
                key = row["o_key"]
                if key in seen:
                    continue
                via = to_edge(row)
                best = reached.get(key)
                if best is None or via.uid < best.uid:
                    reached[key] = via
        seen.update(reached)
        frontier = sorted(reached)
        levels.append(reached)
    versions = yield from versions_at([key for reached in levels for key in reached], as_of)
    found: list[Neighbour] = []
    for level, reached in enumerate(levels, start=1):
        near = [
            Neighbour(entity=versions[key], depth=level, via=via)
            for key, via in reached.items()
            if key in versions
        ]
        found.extend(sorted(near, key=lambda n: (n.entity.entity_type, n.entity.name)))
    return found


def sources(session: str, path: str | None) -> Reading[list[SourceCitationRecord]]:
    params: dict[str, Any] = {"session": session}
    condition = "s.session = $session"
    if path is not None:
        params["path"] = path
        condition += " AND s.path = $path"
    columns = (
        "s.uid AS source_uid, s.session AS session, s.path AS path, s.line_start AS line_start, "
        "s.line_end AS line_end, s.checksum AS checksum, s.text AS text, c.source_event_seq AS seq"
    )
    records: list[SourceCitationRecord] = []
    by_events = yield (
        f"MATCH (v:Event)-[c:CITES_SOURCE]->(s:Source) WHERE {condition} RETURN {columns}",
        params,
    )
    for row in by_events:
        records.append(SourceCitationRecord(**_source_fields(row)))
    by_entities = yield (
        f"MATCH (e:Entity)-[c:CITES_SOURCE]->(s:Source) WHERE {condition} RETURN {columns}, "
        "e.uid AS entity_uid, e.name AS entity_name, e.entity_type AS entity_type",
        params,
    )
    for row in by_entities:
        records.append(
            SourceCitationRecord(
                **_source_fields(row),
                entity_uid=row["entity_uid"],
                entity_name=row["entity_name"],
                entity_type=row["entity_type"],
            )
        )
    return sorted(
        records,
        key=lambda r: (r.cited_by_event_seq, r.path, r.line_start or 0, r.line_end or 0, r.entity_uid or ""),
    )


def _source_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "source_uid": row["source_uid"],
        "session": row["session"],
        "path": row["path"],
        "line_start": row["line_start"],
        "line_end": row["line_end"],
        "checksum": row["checksum"],
        "text": row["text"],
        "cited_by_event_seq": row["seq"],
    }


def observations(
    session: str, task_id: str, type_function: Literal["label", "type"]
) -> Reading[list[ObservationRecord]]:
    """`type_function`: the function giving a relationship's type (LadybugDB: label, Neo4j: type)."""
    rows = yield (
        f"MATCH (t:Entity) WHERE t.key = $key MATCH (t)-[o:{'|'.join(OBSERVATION_TABLES)}]->(v:Event) "
        f"RETURN {type_function}(o) AS kind, v.seq AS seq, v.type AS type, v.ts AS ts, t.uid AS task_uid "
        "ORDER BY v.seq, kind",
        {"key": entity_key(session, task_id, "task")},
    )
    return [
        ObservationRecord(
            task_id=task_id,
            kind=row["kind"],
            session=session,
            seq=row["seq"],
            event_type=row["type"],
            ts=row["ts"],
            task_version_uid=row["task_uid"],
        )
        for row in rows
    ]
