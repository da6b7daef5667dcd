"""The web view's question (`view`) on Neo4j: which nodes, read here; what they look like and what a request
lets through, `view_rows` (shared with LadybugDB), so both backends draw the same graph.

- `focus` (a node id `claims:<Label>:<key>`, or an entity's name): that node and its neighbourhood to
  `depth` hops along every relationship, either direction, through visible nodes and edges only, nearest
  first (each node's outgoing relationships, then incoming, newest first), at most `limit` nodes;
- else `search`: the nodes whose label text holds it (case-insensitive), newest first;
- else the newest nodes;
and every visible edge between the nodes chosen. Newest first is by the time the node was written
(`view_rows.written_at`), then claims before observations before entities, then key descending.

Stored properties are camelCase; `view_rows` reads rows of snake_case names (`_row`). `as_of` is made
canonical first (`view_rows.canonical_as_of`: as stored), so times compare as text.
"""

from __future__ import annotations

import re
from typing import Any, Final

from gateway.packs.claims.model import NODE_LABELS, NodeLabel, entity_key
from gateway.packs.claims.view_rows import (
    LABEL_ORDER,
    Row,
    Visibility,
    canonical_as_of,
    node_id,
    parse_node_id,
    view_edge,
    view_node,
    written_at,
)
from readmodels.graph.cypher.io import ExecuteAsync
from readmodels.view import MAX_VIEW_LIMIT, ViewEdge, ViewGraph, ViewRequest

_TIME: Final[dict[NodeLabel, str]] = {
    "Observation": "recordedAt",
    "Claim": "assertedAt",
    "KnownEntity": "firstSeen",
}
_TEXT: Final[dict[NodeLabel, str]] = {"Observation": "label", "Claim": "label", "KnownEntity": "name"}
_CAMEL: Final = re.compile(r"(?<!^)(?=[A-Z])")
_TOUCHING: Final = (
    "MATCH (n:{label} {{key: $key}}) CALL (n) {{ "
    "MATCH (n)-[r]->(m) RETURN r, m, 0 AS way UNION ALL MATCH (n)<-[r]-(m) RETURN r, m, 1 AS way }} "
    "RETURN type(r) AS rel, properties(r) AS edge, labels(m) AS labels, properties(m) AS node, way "
    "ORDER BY way, r.at DESC, r.session, r.seq, m.key LIMIT $cap"
)
_LEAVING: Final = (
    "UNWIND $keys AS k MATCH (n:{label} {{key: k}})-[r]->(m) "
    "RETURN n.key AS key, type(r) AS rel, properties(r) AS edge, labels(m) AS labels, m.key AS other"
)


def _row(props: Row) -> Row:
    """Stored properties (`observedAt`) as the row `view_rows` reads (`observed_at`)."""
    return {_CAMEL.sub("_", name).lower(): value for name, value in props.items()}


def _edge_row(rel: str, props: Row) -> Row:
    return {**_row(props), "rel": rel, "relation": rel}


def _label(labels: list[str]) -> NodeLabel | None:
    for label in NODE_LABELS:
        if label in labels:
            return label
    return None


Chosen = dict[str, tuple[NodeLabel, Row]]


async def claims_view(execute: ExecuteAsync, request: ViewRequest) -> ViewGraph:
    """The nodes and edges `request` asks for (see the module's docstring)."""
    if request.sessions == []:
        return ViewGraph()
    request = canonical_as_of(request)
    visible = Visibility(request)
    if request.focus is not None:
        chosen = await _neighbourhood(execute, request, visible)
    else:
        chosen = await _newest(execute, request)
    nodes = [view_node(label, row, request.as_of) for label, row in chosen.values()]
    return ViewGraph(nodes=nodes, edges=await _edges_between(execute, chosen, visible))


def _where(label: NodeLabel, request: ViewRequest, params: dict[str, Any]) -> str:
    time = f"n.{_TIME[label]}"
    where = [f"{time} IS NOT NULL"]
    if request.sessions is not None:
        params["sessions"] = request.sessions
        where.append(
            "any(s IN n.sessions WHERE s IN $sessions)"
            if label == "KnownEntity"
            else "n.session IN $sessions"
        )
    if request.as_of is not None:
        params["asOf"] = request.as_of
        where.append(f"{time} <= $asOf")
        if label == "Claim":
            where.append("(n.supersededAt IS NULL OR n.supersededAt > $asOf)")
    if request.search is not None:
        params["search"] = request.search.lower()
        where.append(f"toLower(n.{_TEXT[label]}) CONTAINS $search")
    return " AND ".join(where)


async def _newest(execute: ExecuteAsync, request: ViewRequest) -> Chosen:
    """The newest visible nodes of every label (matching `search` if given), at most `limit`."""
    found: list[tuple[str, int, str, NodeLabel, Row]] = []
    for label in NODE_LABELS:
        params: dict[str, Any] = {"limit": request.limit}
        where = _where(label, request, params)
        rows = await execute(
            f"MATCH (n:{label}) WHERE {where} RETURN properties(n) AS n "
            f"ORDER BY n.{_TIME[label]} DESC, n.key DESC LIMIT $limit",
            params,
        )
        for row in rows:
            node = _row(row["n"])
            found.append((written_at(label, node), -LABEL_ORDER[label], str(node["key"]), label, node))
    found.sort(key=lambda item: item[:3], reverse=True)
    return {node_id(label, key): (label, row) for _, _, key, label, row in found[: request.limit]}


async def _node(execute: ExecuteAsync, label: NodeLabel, key: str) -> Row | None:
    rows = await execute(f"MATCH (n:{label} {{key: $key}}) RETURN properties(n) AS n", {"key": key})
    return _row(rows[0]["n"]) if rows else None


def _start(focus: str) -> tuple[NodeLabel, str] | None:
    parsed = parse_node_id(focus)
    if parsed is not None:
        return parsed
    try:
        return "KnownEntity", entity_key(focus)
    except ValueError:
        return None


async def _neighbourhood(execute: ExecuteAsync, request: ViewRequest, visible: Visibility) -> Chosen:
    """The focus and what lies within `depth` hops of it, nearest first, at most `limit` nodes."""
    assert request.focus is not None
    start = _start(request.focus)
    row = await _node(execute, *start) if start is not None else None
    if start is None or row is None or not visible.node(start[0], row):
        return {}
    chosen: Chosen = {node_id(*start): (start[0], row)}
    frontier = [start]
    for _ in range(request.depth):
        reached: list[tuple[NodeLabel, str]] = []
        for label, key in frontier:
            touching = await execute(_TOUCHING.format(label=label), {"key": key, "cap": 2 * MAX_VIEW_LIMIT})
            for touch in touching:
                other, node = _label(touch["labels"]), _row(touch["node"])
                if len(chosen) >= request.limit:
                    return chosen
                if other is None or node_id(other, str(node["key"])) in chosen:
                    continue
                if visible.edge(_edge_row(touch["rel"], touch["edge"])) and visible.node(other, node):
                    chosen[node_id(other, str(node["key"]))] = (other, node)
                    reached.append((other, str(node["key"])))
        frontier = reached
    return chosen


async def _edges_between(execute: ExecuteAsync, chosen: Chosen, visible: Visibility) -> list[ViewEdge]:
    edges: list[ViewEdge] = []
    for label in NODE_LABELS:
        keys = [str(row["key"]) for known, row in chosen.values() if known == label]
        if not keys:
            continue
        for found in await execute(_LEAVING.format(label=label), {"keys": keys}):
            other = _label(found["labels"])
            if other is None:
                continue
            target = node_id(other, str(found["other"]))
            edge = _edge_row(found["rel"], found["edge"])
            if target in chosen and visible.edge(edge):
                edges.append(view_edge(node_id(label, str(found["key"])), target, edge))
    edges.sort(key=lambda e: (e.source, e.target, e.type, e.valid_from or "", e.citation or ""))
    return edges
