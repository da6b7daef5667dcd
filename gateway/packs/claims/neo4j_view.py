"""The claims model as the web view draws it (`readmodels.view`), on Neo4j.

Nodes are `claims:<label>:<key>`: entities, observations, claims and resolutions (a Resolution is a
`claims:Claim:` node of kind `resolution`); edges are the pack's own (`SUBJECT`, `BASIS`, `SUPERSEDES`,
`CONTRADICTS` with its trust: `system` edges) and the relations between entities (`derived` when an
accepted claim materialised them).

What is drawn: the nodes within `depth` steps of `focus` (a `claims:` id or an entity's name; another
model's id gives nothing), else of the nodes matching `search`, else of the newest observations and claims
(half of `limit`, so their entities fit too); at most `limit` nodes, and the edges between them.
Scope: with `sessions`, only what those sessions wrote (nodes and edges); with `as_of`, only what was
written by then, without the claims superseded by then. Without `as_of`, superseded claims are drawn,
flagged `superseded`. An entity belongs to no session: it is drawn only with an edge that is.
Placeholders (nodes only linked to, not yet projected) are never drawn.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Final

from eventloom.event import utc_timestamp
from gateway.packs.claims.model import NODE_LABELS, SYSTEM_RELS, entity_key
from gateway.packs.claims.reads import InvalidQuestion
from readmodels.graph.cypher.io import ExecuteAsync, Row
from readmodels.view import ViewEdge, ViewGraph, ViewNode, ViewRequest

NODE_PREFIX: Final = "claims:"
LABEL_CHARS: Final = 80
_OTHER_MODEL: Final = re.compile(r"^[a-z][a-z0-9_]*:[^:\s]")
_MODEL_NODE: Final = "(m:Observation OR m:Claim OR m:KnownEntity)"
_EDGE_IN_SCOPE: Final = "($sessions IS NULL OR e.session IN $sessions) AND ($asOf IS NULL OR e.at <= $asOf)"


def _node_in_scope(var: str) -> str:
    """An entity is always (its edges decide); anything else if projected, in scope and not superseded."""
    return (
        f"({var}:KnownEntity OR (coalesce({var}.placeholder, false) = false "
        f"AND ($sessions IS NULL OR {var}.session IN $sessions) "
        f"AND ($asOf IS NULL OR ({var}.at <= $asOf "
        f"AND ({var}.supersededAt IS NULL OR {var}.supersededAt > $asOf)))))"
    )


_NEIGHBOURS: Final = (
    "UNWIND $frontier AS id MATCH (n) WHERE elementId(n) = id "
    f"MATCH (n)-[e]-(m) WHERE {_MODEL_NODE} AND {_EDGE_IN_SCOPE} AND {_node_in_scope('m')} "
    "AND NOT elementId(m) IN $chosen "
    "WITH DISTINCT m RETURN elementId(m) AS id ORDER BY m:KnownEntity DESC, m.at DESC, m.key LIMIT $limit"
)
_NEWEST: Final = (
    "CALL () { MATCH (m:Observation) RETURN m ORDER BY m.at DESC LIMIT $limit "
    "UNION MATCH (m:Claim) RETURN m ORDER BY m.at DESC LIMIT $limit } "
    f"WITH m WHERE m.at IS NOT NULL AND {_node_in_scope('m')} "
    "RETURN elementId(m) AS id ORDER BY m.at DESC, m.key LIMIT $limit"
)
_SEARCH: Final = (
    "CALL () { MATCH (m:KnownEntity) WHERE toLower(m.name) CONTAINS $needle RETURN m "
    "UNION MATCH (m:Observation) WHERE toLower(m.content) CONTAINS $needle RETURN m "
    "UNION MATCH (m:Claim) WHERE toLower(m.subject + ' ' + m.predicate + ' ' + m.object + ' ' "
    "+ coalesce(m.statement, '')) CONTAINS $needle RETURN m } "
    f"WITH m WHERE {_node_in_scope('m')} "
    "RETURN elementId(m) AS id ORDER BY m:KnownEntity DESC, m.at DESC, m.key LIMIT $limit"
)
_FOCUS: Final = f"MATCH (m:{{label}} {{{{key: $key}}}}) WHERE {_node_in_scope('m')} RETURN elementId(m) AS id"
_NODES: Final = (
    "UNWIND $ids AS id MATCH (n) WHERE elementId(n) = id "
    "RETURN id, labels(n) AS labels, properties(n) AS props"
)
_EDGES: Final = (
    "UNWIND $ids AS id MATCH (a) WHERE elementId(a) = id "
    f"MATCH (a)-[e]->(b) WHERE elementId(b) IN $ids AND {_EDGE_IN_SCOPE} "
    "RETURN elementId(a) AS source, elementId(b) AS target, type(e) AS type, properties(e) AS props"
)


def instant(as_of: str | None) -> str | None:
    """`as_of` in the one form stored times have (RFC 3339 UTC, microseconds), so they compare as text."""
    if as_of is None:
        return None
    try:
        moment = datetime.fromisoformat(as_of)
    except ValueError:
        raise InvalidQuestion(f"as_of: {as_of!r} is not an RFC 3339 time") from None
    return utc_timestamp(moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))


async def _focus(execute: ExecuteAsync, focus: str, scope: dict[str, Any]) -> list[str]:
    label, key = "KnownEntity", ""
    if focus.startswith(NODE_PREFIX):
        label, _, key = focus[len(NODE_PREFIX) :].partition(":")
        label = "Claim" if label == "Resolution" else label
        if label not in NODE_LABELS or not key:
            return []
    elif _OTHER_MODEL.match(focus):
        return []
    else:
        try:
            key = entity_key(focus)
        except ValueError:
            return []
    rows = await execute(_FOCUS.format(label=label), {**scope, "key": key})
    return [str(row["id"]) for row in rows]


async def _around(
    execute: ExecuteAsync, seeds: list[str], depth: int, limit: int, scope: dict[str, Any]
) -> list[str]:
    """`seeds`, then their neighbours in scope, `depth` steps out, until `limit` nodes."""
    chosen, frontier = list(dict.fromkeys(seeds))[:limit], list(dict.fromkeys(seeds))
    for _ in range(depth):
        if not frontier or len(chosen) >= limit:
            break
        params = {**scope, "frontier": frontier, "chosen": chosen, "limit": limit - len(chosen)}
        rows = await execute(_NEIGHBOURS, params)
        frontier = [str(row["id"]) for row in rows]
        chosen += frontier
    return chosen


def _claim_label(props: Row) -> str:
    negated = "NOT " if props.get("negated") else ""
    return f"{props.get('subject')} {negated}{props.get('predicate')} {props.get('object')}"


def _node(element: str, labels: list[str], props: Row, as_of: str | None) -> ViewNode:
    key = str(props["key"])
    if "KnownEntity" in labels:
        name = str(props.get("name") or key)
        return ViewNode(
            id=f"{NODE_PREFIX}KnownEntity:{key}",
            kind="entity",
            label=name,
            properties={"key": key, "name": name},
        )
    citations = [str(props["citation"])] if props.get("citation") else []
    if "Observation" in labels:
        content = str(props.get("content") or "")
        return ViewNode(
            id=f"{NODE_PREFIX}Observation:{key}",
            kind="observation",
            label=content if len(content) <= LABEL_CHARS else content[: LABEL_CHARS - 1] + "…",
            session=props.get("session"),
            valid_from=props.get("at"),
            properties={
                "key": key,
                "content": content,
                "source": props.get("source"),
                "observed_at": props.get("observedAt"),
                "extracted_by": props.get("extractedBy"),
            },
            citations=citations,
        )
    superseded_at = props.get("supersededAt")
    superseded = superseded_at is not None and (as_of is None or str(superseded_at) <= as_of)
    properties = {
        name: props.get(stored)
        for name, stored in (
            ("key", "key"),
            ("subject", "subject"),
            ("predicate", "predicate"),
            ("object", "object"),
            ("confidence", "confidence"),
            ("source_agent", "sourceAgent"),
            ("negated", "negated"),
            ("statement", "statement"),
            ("asserted_at", "assertedAt"),
            ("accepted", "accepted"),
            ("superseded_by", "supersededBy"),
        )
        if props.get(stored) is not None and (stored != "supersededBy" or superseded)
    }
    return ViewNode(
        id=f"{NODE_PREFIX}Claim:{key}",
        kind=str(props.get("kind") or "claim"),
        label=_claim_label(props),
        session=props.get("session"),
        valid_from=props.get("at"),
        valid_to=str(superseded_at) if superseded else None,
        superseded=superseded,
        properties=properties,
        citations=citations,
    )


def _edge(source: str, target: str, type: str, props: Row) -> ViewEdge:
    trust = props.get("trust")
    return ViewEdge(
        source=source,
        target=target,
        type=type,
        system=type in SYSTEM_RELS,
        derived=bool(props.get("derived", False)),
        trust=None if trust is None else float(trust),
        valid_from=props.get("at"),
        citation=props.get("citation"),
    )


async def _seeds(execute: ExecuteAsync, request: ViewRequest, scope: dict[str, Any]) -> list[str]:
    if request.focus is not None:
        return await _focus(execute, request.focus, scope)
    needle = " ".join((request.search or "").split()).lower()
    if needle:
        return [
            str(row["id"])
            for row in await execute(_SEARCH, {**scope, "needle": needle, "limit": request.limit})
        ]
    newest = max(1, request.limit // 2)
    return [str(row["id"]) for row in await execute(_NEWEST, {**scope, "limit": newest})]


async def claims_view(execute: ExecuteAsync, request: ViewRequest) -> ViewGraph:
    """The nodes and edges `request` asks for (see the module's docstring)."""
    if request.sessions is not None and not request.sessions:
        return ViewGraph()
    as_of = instant(request.as_of)
    scope: dict[str, Any] = {"sessions": request.sessions, "asOf": as_of}
    seeds = await _seeds(execute, request, scope)
    if not seeds:
        return ViewGraph()
    chosen = await _around(execute, seeds, request.depth, request.limit, scope)
    found = {str(row["id"]): row for row in await execute(_NODES, {"ids": chosen})}
    nodes = {element: _node(element, row["labels"], row["props"], as_of) for element, row in found.items()}
    edges = [
        _edge(nodes[row["source"]].id, nodes[row["target"]].id, str(row["type"]), row["props"])
        for row in await execute(_EDGES, {**scope, "ids": chosen})
        if row["source"] in nodes and row["target"] in nodes
    ]
    linked = {edge.source for edge in edges} | {edge.target for edge in edges}
    drawn = [
        nodes[element]
        for element in chosen
        if element in nodes and (nodes[element].kind != "entity" or nodes[element].id in linked)
    ]
    return ViewGraph(nodes=drawn, edges=edges)
