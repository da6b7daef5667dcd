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
from readmodels.graph.properties import EDGE_TYPES, ENTITY_TYPES
from readmodels.graph.reads import expand, to_edge, to_version, window
from readmodels.graph.records import EntityVersion, Neighbour, RelationEdge

SAME_AS: Final = "same_as"
ACCEPTED: Final = "accepted"
MAX_HOPS: Final = 4
MAX_MEMBERS: Final = 16
_COLUMNS: Final = ", ".join(
    [f"{end}.{name} AS {end}_{name}" for end in ("a", "b") for name in ENTITY_TYPES]
    + ["a.entity_type AS a_type", "b.entity_type AS b_type"]
    + [f"r.{name} AS {name}" for name in EDGE_TYPES]
)
"""Both ends as versions (`reads.to_version` with prefix `a_`, `b_`) and the edge (`reads.to_edge`)."""


class Equivalence(msgspec.Struct, frozen=True, kw_only=True):
    """The other entity versions one version is the same as, and the accepted links that say so."""

    members: list[EntityVersion]
    links: list[RelationEdge]


def _holds(version: EntityVersion, as_of: str | None) -> bool:
    if as_of is None:
        return version.valid_to is None
    return version.valid_from <= as_of and (version.valid_to is None or version.valid_to > as_of)


def same_as_classes(uids: Sequence[str], as_of: str | None = None) -> Reading[dict[str, Equivalence]]:
    """For each of the versions `uids` joined to others by accepted `same_as` links: those others."""
    if not uids:
        return {}
    params: dict[str, Any] = {"relation_type": SAME_AS, "status": ACCEPTED}
    condition = (
        f"r.relation_type = $relation_type AND r.review_status = $status AND {window('r', as_of, params)}"
    )
    versions: dict[str, EntityVersion] = {}
    links: dict[str, RelationEdge] = {}
    adjacent: dict[str, set[str]] = {}
    seen = set(uids)
    frontier = sorted(seen)
    for _ in range(MAX_HOPS):
        if not frontier:
            break
        reached: set[str] = set()
        for near in ("a", "b"):
            rows = yield PerKey(
                f"MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE {near}.uid = $each_key AND {condition} "
                f"RETURN {_COLUMNS}",
                frontier,
                params,
            )
            for row in rows:
                ends = (to_version(row, "a_"), to_version(row, "b_"))
                if not all(_holds(version, as_of) for version in ends):
                    continue
                links[row["uid"]] = to_edge(row)
                for version in ends:
                    versions[version.uid] = version
                adjacent.setdefault(ends[0].uid, set()).add(ends[1].uid)
                adjacent.setdefault(ends[1].uid, set()).add(ends[0].uid)
                reached.update(v.uid for v in ends if v.uid not in seen)
        seen |= reached
        frontier = sorted(reached)
    return _classes(uids, versions, links, adjacent)


def _classes(
    uids: Sequence[str],
    versions: dict[str, EntityVersion],
    links: dict[str, RelationEdge],
    adjacent: dict[str, set[str]],
) -> dict[str, Equivalence]:
    classes: dict[str, Equivalence] = {}
    for uid in dict.fromkeys(uids):
        component, todo = {uid}, [uid]
        while todo and len(component) < MAX_MEMBERS:
            for other in sorted(adjacent.get(todo.pop(), ())):
                if other not in component and len(component) < MAX_MEMBERS:
                    component.add(other)
                    todo.append(other)
        if len(component) == 1:
            continue
        members = sorted((versions[o] for o in component if o != uid), key=lambda v: (v.name, v.uid))
        joined = [
            edge for edge in links.values() if edge.source_uid in component and edge.target_uid in component
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
