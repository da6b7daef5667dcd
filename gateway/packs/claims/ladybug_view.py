"""The web view's question (`view`) on LadybugDB: which nodes, read here; what they look like and what a
request lets through, `view_rows` (shared with Neo4j).

- `focus` (a node id `claims:<Label>:<key>`, or an entity's name): that node and its neighbourhood to
  `depth` hops along every relationship, either direction, through visible nodes and edges only,
  nearest first, at most `limit` nodes (`search` is then not used);
- else `search`: the nodes whose label text holds it (case-insensitive), newest first;
- else the newest nodes;
and every visible edge between the nodes chosen. `as_of` is made canonical first (`view_rows.canonical_as_of`:
as stored), so times compare as text. Newest first is by the time the node was written
(`view_rows.written_at`), then claims before observations before entities, then key descending.
"""

from __future__ import annotations

from typing import Final

from gateway.packs.claims.ladybug_reads import CLAIM, OBSERVATION
from gateway.packs.claims.ladybug_schema import PAIRS
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
from readmodels.graph.cypher.io import Execute
from readmodels.view import ViewEdge, ViewGraph, ViewRequest

_VAR: Final[dict[NodeLabel, str]] = {"Observation": "o", "Claim": "c", "KnownEntity": "e"}
_TIME: Final[dict[NodeLabel, str]] = {
    "Observation": "recordedAt",
    "Claim": "assertedAt",
    "KnownEntity": "firstSeen",
}
_TEXT: Final[dict[NodeLabel, str]] = {"Observation": "label", "Claim": "label", "KnownEntity": "name"}
_COLUMNS: Final[dict[NodeLabel, str]] = {
    "Observation": f"{OBSERVATION}, o.placeholder AS placeholder",
    "Claim": f"{CLAIM}, c.placeholder AS placeholder",
    "KnownEntity": "e.key AS key, e.name AS name, e.firstSeen AS first_seen, e.sessions AS sessions, "
    "e.session AS session, e.seq AS seq, e.hash AS hash",
}
EDGE: Final = (
    "label(r) AS rel, r.relation AS relation, r.at AS at, r.derived AS derived, r.via AS via, "
    "r.trust AS trust, r.method AS method, r.edgeId AS edge_id, r.session AS session, r.seq AS seq, "
    "r.hash AS hash, label(m) AS other_label, m.key AS other_key"
)
Chosen = dict[str, tuple[NodeLabel, Row]]


def view(execute: Execute, request: ViewRequest) -> ViewGraph:
    if request.sessions == []:
        return ViewGraph()
    request = canonical_as_of(request)
    visible = Visibility(request)
    if request.focus is not None:
        chosen = _neighbourhood(execute, request, visible)
    else:
        chosen = _newest(execute, request)
    nodes = [view_node(label, row, request.as_of) for label, row in chosen.values()]
    return ViewGraph(nodes=nodes, edges=_edges_between(execute, chosen, visible))


def _node(execute: Execute, label: NodeLabel, key: str) -> Row | None:
    var = _VAR[label]
    rows = execute(f"MATCH ({var}:{label} {{key: $key}}) RETURN {_COLUMNS[label]}", {"key": key})
    return rows[0] if rows else None


def _newest(execute: Execute, request: ViewRequest) -> Chosen:
    """The newest visible nodes of every label (matching `search` if given), at most `limit`."""
    found: list[tuple[str, int, str, NodeLabel, Row]] = []
    for label in NODE_LABELS:
        var = _VAR[label]
        where = [] if label == "KnownEntity" else [f"NOT coalesce({var}.placeholder, false)"]
        params: dict[str, object] = {}
        if request.sessions is not None:
            where.append(
                f"list_has_any({var}.sessions, $sessions)"
                if label == "KnownEntity"
                else f"{var}.session IN $sessions"
            )
            params["sessions"] = request.sessions
        if request.as_of is not None:
            where.append(f"{var}.{_TIME[label]} <= $as_of")
            if label == "Claim":
                where.append("(c.supersededAt IS NULL OR c.supersededAt > $as_of)")
            params["as_of"] = request.as_of
        if request.search is not None:
            where.append(f"lower({var}.{_TEXT[label]}) CONTAINS $search")
            params["search"] = request.search.lower()
        condition = f"WHERE {' AND '.join(where)} " if where else ""
        rows = execute(
            f"MATCH ({var}:{label}) {condition}RETURN {_COLUMNS[label]} "
            f"ORDER BY {var}.{_TIME[label]} DESC, key DESC LIMIT {int(request.limit)}",
            params,
        )
        found += [(written_at(label, row), -LABEL_ORDER[label], str(row["key"]), label, row) for row in rows]
    found.sort(key=lambda item: item[:3], reverse=True)
    return {node_id(label, key): (label, row) for _, _, key, label, row in found[: request.limit]}


def _start(execute: Execute, focus: str) -> tuple[NodeLabel, str] | None:
    parsed = parse_node_id(focus)
    if parsed is not None:
        return parsed
    try:
        return "KnownEntity", entity_key(focus)
    except ValueError:
        return None


def _neighbourhood(execute: Execute, request: ViewRequest, visible: Visibility) -> Chosen:
    """The focus and what lies within `depth` hops of it, nearest first, at most `limit` nodes."""
    assert request.focus is not None
    start = _start(execute, request.focus)
    row = _node(execute, *start) if start is not None else None
    if start is None or row is None or not visible.node(start[0], row):
        return {}
    chosen: Chosen = {node_id(*start): (start[0], row)}
    frontier = [start]
    for _ in range(request.depth):
        reached: list[tuple[NodeLabel, str]] = []
        for label, key in frontier:
            for edge in _touching(execute, label, key, request.limit):
                other: NodeLabel = edge["other_label"]
                other_key = str(edge["other_key"])
                if len(chosen) >= request.limit:
                    return chosen
                if node_id(other, other_key) in chosen or not visible.edge(edge):
                    continue
                found = _node(execute, other, other_key)
                if found is not None and visible.node(other, found):
                    chosen[node_id(other, other_key)] = (other, found)
                    reached.append((other, other_key))
        frontier = reached
    return chosen


def _rels(label: NodeLabel, outgoing: bool) -> str:
    """The relationship types that leave (or reach) a node of `label`: naming them plans one index
    probe per table, an untyped pattern one that costs five times as much."""
    end = 0 if outgoing else 1
    return "|".join(rel for rel, pairs in PAIRS.items() if any(pair[end] == label for pair in pairs))


def _touching(execute: Execute, label: NodeLabel, key: str, most: int | None) -> list[Row]:
    """The relationships to and from a node, each with the label and key of its other end: at most `most`
    each way, newest first, or (`most` None) only those from it, all of them. `most` is written into the
    statement (a checked int): as a parameter, LadybugDB sizes its top-k for the largest and takes ~5x
    as long."""
    var = _VAR[label]
    if most is None:
        patterns, tail = [f"-[r:{_rels(label, True)}]->"], ""
    else:
        patterns = [f"-[r:{_rels(label, True)}]->", f"<-[r:{_rels(label, False)}]-"]
        tail = f" ORDER BY at DESC, session, seq, other_key LIMIT {int(most)}"
    rows: list[Row] = []
    for pattern in patterns:
        rows += execute(f"MATCH ({var}:{label} {{key: $key}}){pattern}(m) RETURN {EDGE}{tail}", {"key": key})
    return rows


def _edges_between(execute: Execute, chosen: Chosen, visible: Visibility) -> list[ViewEdge]:
    edges: list[ViewEdge] = []
    for source, (label, row) in chosen.items():
        for edge in _touching(execute, label, str(row["key"]), None):
            target = node_id(edge["other_label"], str(edge["other_key"]))
            if target in chosen and visible.edge(edge):
                edges.append(view_edge(source, target, edge))
    edges.sort(key=lambda e: (e.source, e.target, e.type, e.valid_from or "", e.citation or ""))
    return edges
