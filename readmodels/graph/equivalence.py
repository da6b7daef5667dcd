"""Accepted `same_as` links: the entities that are one, read together without rewriting either.

The `entity_resolution` producer proposes `same_as` edges (`inference.edge.generated`, `review_status`
`proposed`); a reviewer accepts one by asserting the same edge again with `review_status` `accepted`, which
closes the proposed edge and opens the accepted one; `inference.edge.retracted` closes it. Reads follow
only `same_as` edges that are accepted and hold at the asked time, in either direction and transitively,
at most `MAX_HOPS` hops and `MAX_MEMBERS` entities per class: so two spellings are seen as one entity
with all their facts and edges while the link stands, and split again once it is retracted.

Like `readmodels.graph.reads`, `same_as_classes` is a backend-neutral `Reading`, run with `GraphStore.read`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import msgspec

from readmodels.graph.cypher.io import PerKey, Reading
from readmodels.graph.reads import (
    EDGE_COLUMNS,
    RELATIONS_OF_EACH_KEY,
    expand,
    keys_of,
    to_edge,
    versions_at,
    window,
)
from readmodels.graph.records import EntityVersion, Neighbour, RelationEdge

SAME_AS: Final = "same_as"
ACCEPTED: Final = "accepted"
MAX_HOPS: Final = 4
MAX_MEMBERS: Final = 16


class Equivalence(msgspec.Struct, frozen=True, kw_only=True):
    """The other entity versions one version is the same as, and the accepted links that say so."""

    members: list[EntityVersion]
    links: list[RelationEdge]


def same_as_classes(uids: Sequence[str], as_of: str | None = None) -> Reading[dict[str, Equivalence]]:
    """For each of the versions `uids` whose entity accepted `same_as` links join to others: those others
    (each as its version at `as_of`), and the links."""
    if not uids:
        return {}
    keys = yield from keys_of(sorted(set(uids)))
    params: dict[str, Any] = {"relation_type": SAME_AS, "status": ACCEPTED}
    condition = (
        f"r.relation_type = $relation_type AND r.review_status = $status AND {window('r', as_of, params)}"
    )
    links: dict[str, RelationEdge] = {}
    adjacent: dict[str, set[str]] = {}
    seen = set(keys.values())
    frontier = sorted(seen)
    for _ in range(MAX_HOPS):
        if not frontier:
            break
        reached: set[str] = set()
        for pattern, _ in RELATIONS_OF_EACH_KEY:
            rows = yield PerKey(f"MATCH {pattern} WHERE {condition} RETURN {EDGE_COLUMNS}", frontier, params)
            for row in rows:
                edge = links[row["uid"]] = to_edge(row)
                adjacent.setdefault(edge.source_key, set()).add(edge.target_key)
                adjacent.setdefault(edge.target_key, set()).add(edge.source_key)
                reached.update(k for k in (edge.source_key, edge.target_key) if k not in seen)
        seen |= reached
        frontier = sorted(reached)
    versions = yield from versions_at(sorted(adjacent), as_of)
    return _classes([(uid, keys[uid]) for uid in uids if uid in keys], versions, links, adjacent)


def _classes(
    starts: list[tuple[str, str]],
    versions: dict[str, EntityVersion],
    links: dict[str, RelationEdge],
    adjacent: dict[str, set[str]],
) -> dict[str, Equivalence]:
    """Per starting version (uid, its entity's key): the entities joined to it, as versions, and links."""
    classes: dict[str, Equivalence] = {}
    for uid, start in dict.fromkeys(starts):
        component, todo = {start}, [start]
        while todo and len(component) < MAX_MEMBERS:
            for other in sorted(adjacent.get(todo.pop(), ())):
                if other not in component and len(component) < MAX_MEMBERS:
                    component.add(other)
                    todo.append(other)
        members = sorted(
            (versions[key] for key in component if key != start and key in versions),
            key=lambda v: (v.name, v.uid),
        )
        if not members:
            continue
        joined = [
            edge for edge in links.values() if edge.source_key in component and edge.target_key in component
        ]
        classes[uid] = Equivalence(members=members, links=sorted(joined, key=lambda e: e.uid))
    return classes


def neighbours(
    session: str,
    name: str,
    entity_type: str | None,
    depth: int,
    as_of: str | None,
    include_inferred: bool,
) -> Reading[list[Neighbour]]:
    """The neighbours of the named entity (`reads.expand` from it), seen as one with the entities it is
    accepted `same_as`: their edges are its edges (their neighbours come at depth 1), and they are not
    its neighbours."""
    params: dict[str, Any] = {"session": session, "name": name}
    conditions = ["e.session = $session", "e.name = $name", window("e", as_of, params)]
    if entity_type is not None:
        params["entity_type"] = entity_type
        conditions.append("e.entity_type = $entity_type")
    start = yield (f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN e.uid AS uid", params)
    uids = [row["uid"] for row in start]
    classes = yield from same_as_classes(uids, as_of)
    members = [m.uid for found in classes.values() for m in found.members]
    return (yield from expand(sorted({*uids, *members}), depth, as_of, include_inferred))
