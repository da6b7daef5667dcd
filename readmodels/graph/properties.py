"""The stored properties of every node and relationship of the graph, with their types.

Both backends store exactly these properties. Types are written as LadybugDB declares columns (the one
backend with a typed schema); Neo4j stores the same values (lists as lists, JSON objects as strings). The
Arrow type of each column type is in `readmodels.graph.arrow_types` (the reads here stay free of Arrow).
"""

from __future__ import annotations

from typing import Final

EVENT_TYPES: Final[dict[str, str]] = {
    "uid": "STRING",
    "session": "STRING",
    "seq": "INT64",
    "hash": "STRING",
    "prev_hash": "STRING",
    "type": "STRING",
    "ts": "STRING",
    "actor": "STRING",
    "summary": "STRING",
    "citation": "STRING",
    "caused_by": "STRING[]",
}
ENTITY_TYPES: Final[dict[str, str]] = {
    "uid": "STRING",
    "key": "STRING",
    "session": "STRING",
    "name": "STRING",
    "entity_type": "STRING",
    "summary": "STRING",
    "properties": "STRING",
    "valid_from": "STRING",
    "valid_to": "STRING",
    "version": "INT64",
    "source_event_seq": "INT64",
    "source_event_hash": "STRING",
    "source_event_type": "STRING",
    "source_thread": "STRING",
}
EDGE_TYPES: Final[dict[str, str]] = {
    "uid": "STRING",
    "key": "STRING",
    "triple": "STRING",
    "session": "STRING",
    "relation_type": "STRING",
    "properties": "STRING",
    "valid_from": "STRING",
    "valid_to": "STRING",
    "source_event_seq": "INT64",
    "source_event_hash": "STRING",
    "source_event_type": "STRING",
    "source_thread": "STRING",
    "inferred": "BOOLEAN",
    "confidence": "DOUBLE",
    "inference_method": "STRING",
    "evidence_event_hashes": "STRING[]",
    "evidence_event_seqs": "INT64[]",
    "evidence_citations": "STRING[]",
    "evidence_quotes": "STRING[]",
    "edge_id": "STRING",
    "review_status": "STRING",
    "authority_status": "STRING",
    "derived_from_event_seq": "INT64",
    "derived_from_event_hash": "STRING",
    "content": "STRING",
}
ENTITY_KEY_TYPES: Final[dict[str, str]] = {
    "key": "STRING",
    "session": "STRING",
    "name": "STRING",
    "entity_type": "STRING",
    "name_key": "STRING",
    "latest_uid": "STRING",
    "versions": "INT64",
}
SOURCE_TYPES: Final[dict[str, str]] = {
    "uid": "STRING",
    "session": "STRING",
    "path": "STRING",
    "line_start": "INT64",
    "line_end": "INT64",
    "checksum": "STRING",
    "text": "STRING",
}
"""Columns of `EntityKey` and `Source`, in table order (their DDL in `0001_nodes` predates these maps)."""
AUDIT_FIELDS: Final = (
    "inferred",
    "confidence",
    "inference_method",
    "evidence_event_hashes",
    "evidence_event_seqs",
    "evidence_citations",
    "evidence_quotes",
    "edge_id",
    "review_status",
    "authority_status",
)
"""The inferred-edge audit fields: on `RELATES`, every typed relationship and `PROJECTED_RELATION`."""
PROJECTED_RELATION_TYPES: Final[dict[str, str]] = {
    "uid": "STRING",  # the edge's uid
    "relation_type": "STRING",
    "action": "STRING",
    "target_key": "STRING",  # the edge's target entity (it points at its source entity)
    "valid_from": "STRING",
    "valid_to": "STRING",
    **{name: EDGE_TYPES[name] for name in AUDIT_FIELDS},
}
CITATION_TYPES: Final[dict[str, str]] = {
    "path": "STRING",
    "line_start": "INT64",
    "line_end": "INT64",
    "checksum": "STRING",
    "source_event_seq": "INT64",
    "source_event_hash": "STRING",
}
OBSERVATION_TYPES: Final[dict[str, str]] = {
    "task_id": "STRING",
    "session": "STRING",
    "seq": "INT64",
    "ts": "STRING",
}
OBSERVATION_TABLES: Final = ("OBSERVED_COMMAND", "OBSERVED_FILE_EDIT", "OBSERVED_TOOL_CALL", "HAS_CHECKPOINT")
