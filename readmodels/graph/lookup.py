"""Batched lookups for retrieval: many entities, names or traversal seeds in one read (any backend).

Retrieval resolves dozens of candidates per question; one statement for all of them keeps a question's
cost flat in the number of candidates. Like `reads`, each lookup is a backend-neutral `Reading`, run with
`GraphStore.read`.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from readmodels.graph.cypher.io import PerKey, Reading
from readmodels.graph.reads import (
    EDGE_COLUMNS,
    ENTITY_COLUMNS,
    expand,
    keys_of,
    latest_rows,
    to_edge,
    to_version,
    window,
)
from readmodels.graph.records import EntityVersion, Neighbour, RelationEdge


class Span(msgspec.Struct, frozen=True, kw_only=True):
    """A span of a source that an entity version cites."""

    path: str
    line_start: int | None
    line_end: int | None


def versions_by_key(keys: Sequence[str]) -> Reading[list[EntityVersion]]:
    """Every version of the entities with these keys (`identity.entity_key`), oldest first per entity."""
    if not keys:
        return []
    rows = yield (
        f"MATCH (e:Entity) WHERE e.key IN $keys RETURN {ENTITY_COLUMNS} ORDER BY e.key, e.valid_from",
        {"keys": sorted(set(keys))},
    )
    return [to_version(row) for row in rows]


def current_by_key(keys: Sequence[str]) -> Reading[list[tuple[EntityVersion, int]]]:
    """The latest version of each entity key, with how many versions the entity has (index lookups)."""
    rows = yield from latest_rows(keys)
    return [(to_version(row), row["versions"]) for row in sorted(rows, key=lambda row: row["key"])]


class NamedKey(msgspec.Struct, frozen=True):
    key: str
    name: str


def keys_by_name(names: Sequence[str], session: str | None) -> Reading[list[NamedKey]]:
    """The entities (keys) whose name equals one of `names`, ignoring case (one row per entity)."""
    if not names:
        return []
    params: dict[str, object] = {"names": sorted({name.lower() for name in names})}
    condition = "toLower(k.name) IN $names"
    if session is not None:
        params["session"] = session
        condition = f"k.session = $session AND {condition}"
    rows = yield (f"MATCH (k:EntityKey) WHERE {condition} RETURN k.key AS key, k.name AS name", params)
    return [NamedKey(row["key"], row["name"]) for row in rows]


def neighbours_of(
    uids: Sequence[str], depth: int, as_of: str | None, include_inferred: bool, fanout: int
) -> Reading[list[Neighbour]]:
    """Entities within `depth` hops of any of the versions `uids`, nearest first, `fanout` edges per hop."""
    if not uids:
        return []
    return (yield from expand(sorted(set(uids)), depth, as_of, include_inferred, fanout))


def cited_spans(uids: Sequence[str]) -> Reading[dict[str, list[Span]]]:
    """The source spans each of the versions `uids` cites."""
    if not uids:
        return {}
    rows = yield PerKey(  # ordered here: a sort in the statement costs more than the lookup
        "MATCH (e:Entity)-[:CITES_SOURCE]->(s:Source) WHERE e.uid = $each_key "
        "RETURN e.uid AS uid, s.path AS path, s.line_start AS line_start, s.line_end AS line_end",
        sorted(set(uids)),
        {},
    )
    spans: dict[str, list[Span]] = {}
    for row in rows:
        span = Span(path=row["path"], line_start=row["line_start"], line_end=row["line_end"])
        spans.setdefault(row["uid"], []).append(span)
    for cited in spans.values():
        cited.sort(key=_span_order)
    return spans


def _span_order(span: Span) -> tuple[str, bool, int, bool, int]:
    """By path, then line (a span without lines last), as `ORDER BY path, line_start` would."""
    start, end = span.line_start, span.line_end
    return (span.path, start is None, start or 0, end is None, end or 0)


ASSERTING_ACTIONS = ("created", "superseded", "updated", "unchanged", "reopened")
"""How an event touched a version when it asserted it (not merely named it, invalidated or retracted it)."""


def asserted_by(event_uids: Sequence[str]) -> Reading[dict[str, list[str]]]:
    """The entity keys each event (`identity.event_uid`) asserted."""
    if not event_uids:
        return {}
    rows = yield PerKey(  # deduplicated and ordered here: both cost more in the statement than the lookup
        "MATCH (ev:Event)-[p:PROJECTED_ENTITY]->(e:Entity) WHERE ev.uid = $each_key AND p.action IN $actions "
        "RETURN ev.uid AS uid, e.key AS key",
        sorted(set(event_uids)),
        {"actions": list(ASSERTING_ACTIONS)},
    )
    asserted: dict[str, set[str]] = {}
    for row in rows:
        asserted.setdefault(row["uid"], set()).add(row["key"])
    return {uid: sorted(keys) for uid, keys in asserted.items()}


class InvalidationRow(msgspec.Struct, frozen=True, kw_only=True):
    """An event that closed an entity's version without a successor (`memory.invalidated`, a deleted file)."""

    key: str
    name: str
    entity_type: str
    session: str
    invalid_at: str
    seq: int
    hash: str
    citation: str
    summary: str | None


def invalidations_of(keys: Sequence[str]) -> Reading[list[InvalidationRow]]:
    """Every invalidation of the entities with these keys, oldest first."""
    if not keys:
        return []
    rows = yield (
        "MATCH (ev:Event)-[p:PROJECTED_ENTITY]->(e:Entity) WHERE e.key IN $keys AND p.action = 'invalidated' "
        "RETURN e.key AS key, e.name AS name, e.entity_type AS entity_type, e.session AS session, "
        "e.valid_to AS invalid_at, ev.seq AS seq, ev.hash AS hash, ev.citation AS citation, "
        "ev.summary AS summary ORDER BY invalid_at, key",
        {"keys": sorted(set(keys))},
    )
    return [msgspec.convert(row, InvalidationRow) for row in rows]


def tasks_in(session: str | None, as_of: str | None, limit: int) -> Reading[list[EntityVersion]]:
    """The task versions holding at `as_of` (in `session`, or everywhere), newest first."""
    params: dict[str, object] = {"limit": limit}
    condition = f"e.entity_type = 'task' AND {window('e', as_of, params)}"
    if session is not None:
        params["session"] = session
        condition += " AND e.session = $session"
    rows = yield (
        f"MATCH (e:Entity) WHERE {condition} RETURN {ENTITY_COLUMNS} ORDER BY e.valid_from DESC LIMIT $limit",
        params,
    )
    return [to_version(row) for row in rows]


class Dependency(msgspec.Struct, frozen=True):
    uid: str
    """The version that depends."""
    key: str
    """The entity it depends on."""
    name: str


def dependencies_of(uids: Sequence[str], as_of: str | None) -> Reading[list[Dependency]]:
    """The `depends_on` relations of the versions `uids`' entities that hold at `as_of`."""
    if not uids:
        return []
    keys = yield from keys_of(sorted(set(uids)))
    params: dict[str, object] = {}
    rows = yield PerKey(
        "MATCH (a:EntityKey {key: $each_key})-[r:RELATES]->(b:EntityKey) "
        "WHERE r.relation_type = 'depends_on' "
        f"AND coalesce(r.inferred, false) = false AND {window('r', as_of, params)} "
        "RETURN DISTINCT a.key AS source, b.key AS key, b.name AS name",
        sorted(set(keys.values())),
        params,
    )
    depends: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        depends.setdefault(row["source"], []).append((row["name"], row["key"]))
    return [
        Dependency(uid, key, name)
        for uid in sorted(keys)
        for name, key in sorted(set(depends.get(keys[uid], ())))
    ]


def edges_asserted_by(event_uids: Sequence[str]) -> Reading[dict[str, RelationEdge]]:
    """The inferred or causal edge each event (`identity.event_uid`) created, by the event: what a derived
    event proposed, with its own confidence and audit fields (an event that created none is absent)."""
    if not event_uids:
        return {}
    rows = yield PerKey(
        "MATCH (ev:Event {uid: $each_key})-[p:PROJECTED_RELATION]->(a:EntityKey)-[r:RELATES]->(b:EntityKey) "
        "WHERE p.action IN $actions AND r.uid = p.uid AND coalesce(r.inferred, false) = true "
        f"RETURN ev.uid AS event_uid, {EDGE_COLUMNS}",
        sorted(set(event_uids)),
        {"actions": ["created", "superseded"]},
    )
    return {row["event_uid"]: to_edge(row) for row in rows}
