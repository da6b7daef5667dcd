"""The core temporal graph as the web view draws it: entity versions as nodes, relations as edges.

A node is one entity **version** (`graph:<uid>`), so the graph at an instant holds exactly the versions
current then: with `as_of`, a version superseded (or invalidated) by that time is left out, as is
everything that started after it. Without `as_of` the view is the graph now *and its history*: closed
versions are drawn too, flagged `superseded`, each linked to the version that followed it by a
`SUPERSEDED_BY` system edge. Edges are the relations that hold at `as_of` (without it: those still open);
inferred and causal ones are `system` edges with their confidence as `trust`.

The generic `event` entities (one per event of a type no extractor knows, a domain pack's say) are not
drawn: the pack's own view draws what they mean, and the timeline shows the events themselves.

Like `readmodels.retrieval.causal_chains`, these are backend-neutral `Reading`s, run with
`GraphStore.read`.
"""

from __future__ import annotations

import itertools
import re
from collections import defaultdict
from typing import Any, Final

from eventloom.event import citation
from readmodels.graph.cypher.io import PerKey, Reading
from readmodels.graph.identity import decode_json
from readmodels.graph.reads import ENTITY_COLUMNS, expand, window
from readmodels.view import ViewEdge, ViewGraph, ViewNode, ViewRequest, ViewVersion

NODE_PREFIX: Final = "graph:"
HIDDEN_TYPES: Final = ("event",)
_OTHER_MODEL: Final = re.compile(r"^[a-z][a-z0-9_]*:[^:]")
_EDGE_COLUMNS: Final = (
    "a.key AS source, b.key AS target, r.relation_type AS relation_type, r.inferred AS inferred, "
    "r.confidence AS confidence, r.valid_from AS valid_from, r.valid_to AS valid_to, r.session AS session, "
    "r.source_event_seq AS seq, r.source_event_hash AS hash"
)


def node_id(uid: str) -> str:
    return NODE_PREFIX + uid


def graph_view(request: ViewRequest) -> Reading[ViewGraph]:
    """The nodes around `request.focus` (a `graph:` id or an entity's name), else those matching
    `request.search`, else the newest `request.limit` versions; only of `request.sessions` when set."""
    if request.sessions is not None and not request.sessions:
        return ViewGraph()
    if request.focus is not None:
        rows = yield from _around(request, request.focus)
    else:
        rows = yield from _listed(request)
    rows = [row for row in rows if request.sessions is None or row["session"] in request.sessions]
    return (yield from _drawn(rows, request.as_of))


def _scope(request: ViewRequest, params: dict[str, Any]) -> list[str]:
    """The conditions on `e` every read shares: its sessions, its window, not a generic entity."""
    params["hidden"] = list(HIDDEN_TYPES)
    conditions = ["NOT e.entity_type IN $hidden"]
    if request.sessions is not None:
        params["sessions"] = request.sessions
        conditions.append("e.session IN $sessions")
    if request.as_of is not None:
        conditions.append(window("e", request.as_of, params))
    return conditions


def _listed(request: ViewRequest) -> Reading[list[dict[str, Any]]]:
    params: dict[str, Any] = {"limit": request.limit}
    conditions = _scope(request, params)
    if request.search:
        params["needle"] = " ".join(request.search.split()).lower()
        conditions.append(
            "(toLower(e.name) CONTAINS $needle OR toLower(coalesce(e.summary, '')) CONTAINS $needle)"
        )
    rows: list[dict[str, Any]] = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN {ENTITY_COLUMNS} "
        "ORDER BY e.valid_from DESC, e.uid LIMIT $limit",
        params,
    )
    return rows


def _around(request: ViewRequest, focus: str) -> Reading[list[dict[str, Any]]]:
    """The focus's versions (by uid, or every entity of that name), then what is within `depth` hops."""
    params: dict[str, Any] = {"limit": request.limit}
    conditions = _scope(request, params)
    if focus.startswith(NODE_PREFIX):
        params["uid"] = focus.removeprefix(NODE_PREFIX)
        conditions.append("e.uid = $uid")
    elif _OTHER_MODEL.match(focus):
        return []  # another model's node (`claims:...`): that model answers for it
    else:
        params["name"] = " ".join(focus.split()).lower()
        conditions.append("toLower(e.name) = $name")
    found: list[dict[str, Any]] = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN {ENTITY_COLUMNS} "
        "ORDER BY e.valid_from DESC, e.uid LIMIT $limit",
        params,
    )
    if not found:
        return []
    if request.as_of is None:  # the focus's history: its other versions
        lineage: list[dict[str, Any]] = yield (
            f"MATCH (e:Entity) WHERE e.key IN $keys RETURN {ENTITY_COLUMNS} ORDER BY e.valid_from",
            {"keys": sorted({row["key"] for row in found})},
        )
        found += lineage
    near = yield from expand(
        [row["uid"] for row in found], request.depth, request.as_of, True, fanout=request.limit
    )
    keys = {near.entity.uid for near in near}
    reached: list[dict[str, Any]] = []
    if keys:
        by_uid = f"MATCH (e:Entity) WHERE e.uid = $each_key RETURN {ENTITY_COLUMNS}"
        reached = yield PerKey(by_uid, sorted(keys), {})
    unique = {row["uid"]: row for row in [*found, *reached] if row["entity_type"] not in HIDDEN_TYPES}
    return list(unique.values())[: request.limit]


def _drawn(rows: list[dict[str, Any]], as_of: str | None) -> Reading[ViewGraph]:
    """The view of these versions: each with its entity's whole history, and the edges between them."""
    if not rows:
        return ViewGraph()
    history: list[dict[str, Any]] = yield (
        f"MATCH (e:Entity) WHERE e.key IN $keys RETURN {ENTITY_COLUMNS} ORDER BY e.valid_from",
        {"keys": sorted({row["key"] for row in rows})},
    )
    versions: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for version in history:
        versions[version["key"]].append(version)
    uids = sorted({row["uid"] for row in rows})
    # a relation joins entities: it is drawn between their drawn versions that hold at `as_of` (open ones)
    holding = {row["key"]: row["uid"] for row in rows if _holds(row, as_of)}
    params: dict[str, Any] = {"keys": sorted(holding)}
    condition = window("r", as_of, params)
    edge_rows: list[dict[str, Any]] = yield PerKey(
        "MATCH (a:EntityKey {key: $each_key})-[r:RELATES]->(b:EntityKey) "
        f"WHERE b.key IN $keys AND {condition} RETURN {_EDGE_COLUMNS}",
        sorted(holding),
        params,
    )
    edge_rows = [
        {**row, "source": holding[row["source"]], "target": holding[row["target"]]} for row in edge_rows
    ]
    edge_rows.sort(key=lambda row: (row["relation_type"], row["source"], row["target"]))
    nodes = [_node(row, versions[row["key"]], as_of) for row in rows]
    edges = [_edge(row) for row in edge_rows] + _lineage(set(uids), versions)
    return ViewGraph(nodes=nodes, edges=edges)


def _holds(row: dict[str, Any], as_of: str | None) -> bool:
    """Every version drawn as of an instant holds then; without one, the open ones hold."""
    return as_of is not None or row["valid_to"] is None


def _citation(row: dict[str, Any]) -> str:
    return citation(row["session"], row["source_event_seq"], row["source_event_hash"])


def _said(row: dict[str, Any]) -> dict[str, Any]:
    said = decode_json(row["properties"])
    if row["summary"] is not None:
        said["summary"] = row["summary"]
    return said


def _node(row: dict[str, Any], versions: list[dict[str, Any]], as_of: str | None) -> ViewNode:
    """`superseded`: closed by now (as of an instant, every version drawn held then)."""
    label = row["name"] if len(versions) < 2 else f"{row['name']} (v{row['version']})"
    return ViewNode(
        id=node_id(row["uid"]),
        kind=row["entity_type"],
        label=label,
        session=row["session"],
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        superseded=as_of is None and row["valid_to"] is not None,
        properties={
            **_said(row),
            "name": row["name"],
            "entity_type": row["entity_type"],
            "version": row["version"],
        },
        citations=[_citation(row)],
        versions=[
            ViewVersion(
                valid_from=version["valid_from"],
                valid_to=version["valid_to"],
                properties={**_said(version), "version": version["version"]},
                citation=_citation(version),
            )
            for version in versions
        ],
    )


def _edge(row: dict[str, Any]) -> ViewEdge:
    inferred = bool(row["inferred"])
    return ViewEdge(
        source=node_id(row["source"]),
        target=node_id(row["target"]),
        type=row["relation_type"].upper(),
        system=inferred,
        derived=inferred,
        trust=row["confidence"] if inferred else None,
        valid_from=row["valid_from"],
        valid_to=row["valid_to"],
        citation=citation(row["session"], row["seq"], row["hash"]),
    )


def _lineage(drawn: set[str], versions: dict[str, list[dict[str, Any]]]) -> list[ViewEdge]:
    """`SUPERSEDED_BY` from each drawn version to the next one, when both are drawn."""
    edges = []
    for lineage in versions.values():
        for older, newer in itertools.pairwise(lineage):
            if older["uid"] in drawn and newer["uid"] in drawn:
                edges.append(
                    ViewEdge(
                        source=node_id(older["uid"]),
                        target=node_id(newer["uid"]),
                        type="SUPERSEDED_BY",
                        system=True,
                        valid_from=newer["valid_from"],
                        citation=_citation(newer),
                    )
                )
    return edges
