"""Reads before a batch: checkpoints, the `Snapshot` of versions and names, and open edges (any backend).

What a batch touches is read inside the batch's write transaction, so resolution sees exactly the state
the batch will be written on top of.
"""

from __future__ import annotations

from typing import Any

from readmodels.graph.cypher.io import Reading
from readmodels.graph.identity import checkpoint_uid, decode_json
from readmodels.graph.plan import EdgeDemands, EntityRow, LoadRequest, RelationRow, Snapshot
from readmodels.graph.properties import EDGE_TYPES
from readmodels.graph.reads import latest_rows, stored_edge_fields


def _returns(types: dict[str, str], var: str) -> str:
    return ", ".join(f"{var}.{name} AS {name}" for name in types)


EDGE_RETURN = (
    "a.key AS source_key, b.key AS target_key, a.name AS source_name, b.name AS target_name, "
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
        source_key=row["source_key"],
        target_key=row["target_key"],
        source_name=row["source_name"],
        target_name=row["target_name"],
        **stored_edge_fields(row),
        content=row["content"] or "",
        loaded_uid=row["uid"],
    )


def read_checkpoints(projector: str, sessions: list[str]) -> Reading[dict[str, int]]:
    if not sessions:
        return {}
    rows = yield (
        "UNWIND $ids AS id MATCH (c:Checkpoint {id: id}) RETURN c.session AS session, c.seq AS seq",
        {"ids": [checkpoint_uid(projector, session) for session in sessions]},
    )
    return {str(row["session"]): int(row["seq"]) for row in rows}


def load_snapshot(request: LoadRequest) -> Reading[Snapshot]:
    """Read the latest versions and names a batch touches, and open edges it names by `edge_id`."""
    snapshot = Snapshot()
    keys = dict.fromkeys(request.entity_keys)
    if request.name_keys:
        snapshot.names = {name: set() for name in request.name_keys}
        rows = yield (
            "MATCH (k:EntityKey) WHERE k.name_key IN $names RETURN k.name_key AS name_key, k.key AS key",
            {"names": request.name_keys},
        )
        for row in rows:
            snapshot.names[row["name_key"]].add(row["key"])
            keys[row["key"]] = None
    if keys:
        rows = yield from latest_rows(list(keys))
        snapshot.heads = {row["key"]: entity_from_row(row) for row in rows}
    if request.edge_ids:
        wanted = set(request.edge_ids)
        rows = yield (
            "MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE r.valid_to IS NULL AND r.edge_id IN $ids "
            f"RETURN {EDGE_RETURN}",
            {"ids": sorted({edge_id for _, edge_id in wanted})},
        )
        snapshot.edge_id_edges = [
            edge_from_row(row) for row in rows if (row["session"], row["edge_id"]) in wanted
        ]
    return snapshot


def load_open_edges(demands: EdgeDemands) -> Reading[list[RelationRow]]:
    """The stored open edges a first resolution asked for: of invalidated entities, by key, by triple."""
    edges: list[RelationRow] = []
    entities = sorted(demands.entities)
    if entities:
        for pattern in (
            "MATCH (a:EntityKey {key: entity}) MATCH (a)-[r:RELATES]->(b:EntityKey)",
            "MATCH (b:EntityKey {key: entity}) MATCH (a:EntityKey)-[r:RELATES]->(b)",
        ):
            rows = yield (
                f"UNWIND $entities AS entity {pattern} WHERE r.valid_to IS NULL RETURN {EDGE_RETURN}",
                {"entities": entities},
            )
            edges.extend(edge_from_row(row) for row in rows)
    for field, wanted in (("key", demands.keys), ("triple", demands.triples)):
        pairs = [
            {"entity": entity, "value": value}
            for entity, value in sorted(wanted)
            if entity not in demands.entities
        ]
        if pairs:
            rows = yield (
                "UNWIND $pairs AS p MATCH (a:EntityKey {key: p.entity}) MATCH (a)-[r:RELATES]->(b:EntityKey) "
                f"WHERE r.valid_to IS NULL AND r.{field} = p.value RETURN {EDGE_RETURN}",
                {"pairs": pairs},
            )
            edges.extend(edge_from_row(row) for row in rows)
    return edges
