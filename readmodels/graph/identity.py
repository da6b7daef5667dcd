"""Deterministic identities of graph elements, shared by every backend.

Every id is a function of what the element *is* (session, names, types, instants, the event that made it),
never of when or in which batch it was written: a graph rebuilt from the log in batches of any size has the
same ids as one built event by event.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any, Final

import msgspec

from readmodels.graph.model import check_snake_case

_SEP: Final = "\x1f"
_canonical = msgspec.json.Encoder(order="sorted")

RESERVED_LABELS: Final = frozenset(
    {
        "SESSION",
        "EVENT",
        "ENTITY",
        "ENTITYKEY",
        "SOURCE",
        "CHECKPOINT",
        "MIGRATION",
        "HAS_EVENT",
        "NEXT_EVENT",
        "PREVIOUS_EVENT",
        "SUPERSEDED_BY",
        "PREVIOUS_VERSION",
        "RELATES",
        "PROJECTED_ENTITY",
        "PROJECTED_RELATION",
        "CITES_SOURCE",
        "OBSERVED_COMMAND",
        "OBSERVED_FILE_EDIT",
        "OBSERVED_TOOL_CALL",
        "HAS_CHECKPOINT",
    }
)
"""Labels of the fixed schema; a relation type must never become one of them."""
TYPED_PREFIX: Final = "REL_"


_KEY_CACHE: Final = 1 << 12
"""Keys derived from names recur in every batch that mentions the entity: remember the recent ones. A
batch's worth is enough: a key not remembered costs one SHA-256 of a short string (~1 us), while each
entry held costs ~300 bytes, which at 65,536 entries a cache made ~20 MB of a node after a catch-up."""


def _digest(*parts: str) -> str:
    return hashlib.sha256(_SEP.join(parts).encode("utf-8")).hexdigest()[:32]


def typed_label(relation_type: str) -> str:
    """The typed relationship label of a relation type: its UPPER_SNAKE form.

    Only strict snake_case is accepted (`InvalidGraphWrite` otherwise), so the label is `[A-Z][A-Z0-9_]*`
    and safe to splice into Cypher. A type whose label would collide with the fixed schema (`relates`,
    `has_event`, ...) or start with the prefix gets the prefix `REL_`, so the two can never mix.
    """
    label = check_snake_case("relation_type", relation_type).upper()
    if label in RESERVED_LABELS or label.startswith(TYPED_PREFIX):
        return TYPED_PREFIX + label
    return label


def event_uid(session: str, seq: int) -> str:
    return f"{session}/{seq}"


def session_uid(session: str) -> str:
    return session


def checkpoint_uid(projector: str, session: str) -> str:
    return f"{projector}{_SEP}{session}"


@lru_cache(maxsize=_KEY_CACHE)
def entity_key(session: str, name: str, entity_type: str) -> str:
    """Identity of an entity across its versions: (session, name, entity_type)."""
    return _digest("entity", session, entity_type, name)


@lru_cache(maxsize=_KEY_CACHE)
def name_key(session: str, name: str) -> str:
    """Identity of a name within a session, whatever the entity type."""
    return _digest("name", session, name)


def entity_uid(key: str, valid_from: str) -> str:
    """Identity of one version: (session, name, entity_type, valid_from)."""
    return _digest("version", key, valid_from)


@lru_cache(maxsize=_KEY_CACHE)
def triple_key(session: str, source: str, target: str, relation_type: str) -> str:
    """Identity of `source -[relation_type]-> target` by entity names, asserted or inferred alike."""
    return _digest("triple", session, source, target, relation_type)


def relation_key(
    session: str,
    relation_type: str,
    source_key: str,
    target_key: str,
    *,
    inferred: bool,
    edge_id: str | None,
    method: str | None,
) -> str:
    """Identity of a relation across its versions.

    An inferred edge with an `edge_id` is that id; one without is its two entities (keys, so types
    count), its type and its inference method; an asserted relation is its two entities and its type.
    Asserted and inferred relations never share a key.
    """
    if edge_id is not None:
        return _digest("edge", session, edge_id)
    if inferred:
        return _digest("inferred", source_key, target_key, relation_type, method or "")
    return _digest("asserted", source_key, target_key, relation_type)


def edge_uid(key: str, source_key: str, target_key: str, valid_from: str, created_by_seq: int) -> str:
    """Identity of one edge: its key, the two versions it joins, when it starts and the event that made it."""
    return _digest("edge", key, source_key, target_key, valid_from, str(created_by_seq))


def source_uid(
    session: str, path: str, line_start: int | None, line_end: int | None, checksum: str | None
) -> str:
    """Identity of a cited span: (session, path, line range, checksum)."""
    return _digest("source", session, path, str(line_start), str(line_end), checksum or "")


def content_hash(value: Any) -> str:
    """A stable digest of JSON-like content (sorted keys), to tell a changed reassertion from a repeat."""
    return hashlib.sha256(_canonical.encode(value)).hexdigest()[:32]


def encode_json(value: Any) -> str:
    """Sorted-key JSON text, the form properties are stored in."""
    return _canonical.encode(value).decode("utf-8")


def decode_json(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = msgspec.json.decode(text)
    return value if isinstance(value, dict) else {}
