"""The graph the web view draws: the core graph (from the query service) and every pack that has a view.

Each installed entry point of `readmodels.view.GRAPH_VIEWS_GROUP` names a projector (its name) and the
question its `Answers` takes a `ViewRequest` on (its value). Every model is asked at once; a pack that
does not answer in time, or at all, is left out and named in `warnings`. The merged answer keeps only what
the caller may see: nodes of sessions its token may touch (every session whose data a node carries: its
citations, its sources), a node of no session only when an edge from one of those reaches it, and edges
whose two ends are kept.

A pack that also projects into the core graph (the claims pack makes its observations, claims and the
entities they name core entities, so memory search finds them) would draw them twice. So a core node
that names a pack node (same name as the pack node's key, compared case-folded, in the same session or the
pack node in none) is folded into it, its edges moving with it, when it is that node (a generic `entity`,
or every event it cites is one the pack node cites), and a core edge between two folded nodes is left
to the pack to draw; a typed core entity of the same name (a `person` Alice beside the claims model's
Alice) stays, linked to it by a `SAME_NAME` system edge.
"""

from __future__ import annotations

import asyncio
import logging
import unicodedata
from collections.abc import Awaitable
from importlib.metadata import entry_points
from typing import Final

import msgspec
from nats.aio.client import Client

from gateway.access.scope import sessions_of
from gateway.access.tokens import Principal
from readmodels.consistency import Consistency
from readmodels.query.answers import ask
from readmodels.query.client import MemoryQueryFailed
from readmodels.query.protocol import MemoryService, MemoryUnavailableError
from readmodels.retrieval.model import QueryError
from readmodels.view import GRAPH_VIEWS_GROUP, ViewEdge, ViewGraph, ViewNode, ViewRequest

log = logging.getLogger(__name__)
PACK_TIMEOUT_S: Final = 5.0
_LEFT_OUT: Final = (MemoryUnavailableError, MemoryQueryFailed, QueryError, msgspec.ValidationError)
"""What a pack's view may fail with and be left out for; anything else is a bug, and raised."""


class WebGraph(msgspec.Struct, frozen=True, kw_only=True):
    """A `ViewGraph` and the models left out of it (each with why)."""

    nodes: list[ViewNode] = msgspec.field(default_factory=list)
    edges: list[ViewEdge] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)
    consistency: Consistency | None = None
    """Set when the request gave `after`: whether the core graph had applied it (see `Consistency`)."""


def pack_views() -> dict[str, str]:
    """Projector -> question, of every installed graph view (a broken entry point is logged, skipped)."""
    views: dict[str, str] = {}
    for entry in sorted(entry_points(group=GRAPH_VIEWS_GROUP), key=lambda entry: entry.name):
        try:
            question = entry.load()
        except Exception:
            log.exception("graph view %r failed to load", entry.name)
            continue
        views[entry.name] = str(question)
    return views


async def _pack(client: Client, projector: str, question: str, request: ViewRequest) -> ViewGraph:
    answer = await ask(client, projector, question, request, timeout_s=PACK_TIMEOUT_S)
    return msgspec.convert(answer, ViewGraph)


async def view_graph(
    memory: MemoryService, client: Client, request: ViewRequest, principal: Principal
) -> WebGraph:
    """The core graph and every pack's view for `request`, merged and cut to what `principal` may see.

    Raises what the core graph raises (`QueryError`, `MemoryUnavailableError`): without it there is no
    view; a pack's failure is a warning."""
    views = pack_views()
    asked: list[Awaitable[ViewGraph]] = [memory.graph_view(request)]
    asked += [_pack(client, projector, question, request) for projector, question in views.items()]
    answers = await asyncio.gather(*asked, return_exceptions=True)
    core, packs = answers[0], answers[1:]
    if isinstance(core, BaseException):
        raise core
    graphs, warnings = [core], []
    for projector, answer in zip(views, packs, strict=True):
        if isinstance(answer, ViewGraph):
            graphs.append(answer)
        elif isinstance(answer, _LEFT_OUT):
            warnings.append(f"{projector}: {answer}")
        else:
            raise answer
    lag = core.consistency.warning() if core.consistency is not None else None
    seen = visible(graphs, principal, warnings + ([lag] if lag else []))
    return msgspec.structs.replace(seen, consistency=core.consistency)


def _folded(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def unified(core: ViewGraph, packs: list[ViewGraph]) -> tuple[dict[str, ViewNode], list[ViewEdge]]:
    """Every node by id (first wins) and every edge, each core node that is a pack's node folded into it."""
    named: dict[str, list[ViewNode]] = {}
    for graph in packs:
        for node in graph.nodes:
            named.setdefault(_folded(node.id.split(":", 2)[-1]), []).append(node)
    folded: dict[str, str] = {}
    same_name: list[ViewEdge] = []
    for node in core.nodes:
        name = node.properties.get("name")
        for twin in named.get(_folded(name), []) if isinstance(name, str) else []:
            if twin.session not in (None, node.session):
                continue
            if node.kind == "entity" or set(node.citations) <= set(twin.citations):
                folded[node.id] = twin.id
                break
            same_name.append(ViewEdge(source=node.id, target=twin.id, type="SAME_NAME", system=True))
    nodes: dict[str, ViewNode] = {}
    for graph in [core, *packs]:
        for node in graph.nodes:
            if node.id not in folded:
                nodes.setdefault(node.id, node)
    edges = [  # a core edge between two folded nodes is the pack's relationship again: the pack draws it
        msgspec.structs.replace(
            edge, source=folded.get(edge.source, edge.source), target=folded.get(edge.target, edge.target)
        )
        for graph in [core, *packs]
        for edge in graph.edges
        if not (edge.source in folded and edge.target in folded)
    ]
    return nodes, [edge for edge in edges + same_name if edge.source != edge.target]


def visible(graphs: list[ViewGraph], principal: Principal, warnings: list[str]) -> WebGraph:
    """`graphs` (the core's first) merged, with only what `principal` may see."""
    nodes, edges = unified(graphs[0], graphs[1:])

    def may_see(node: ViewNode) -> bool:
        """Every session the node carries data of (its citations, its sources), not only its own."""
        return principal.unrestricted or all(
            principal.may_touch(session) for session in sessions_of(msgspec.to_builtins(node))
        )

    allowed = {id for id, node in nodes.items() if node.session and may_see(node)}
    if principal.unrestricted:
        allowed |= nodes.keys()
    for edge in edges:  # a node of no session (a named thing) shows when a visible node links to it
        for near, far in ((edge.source, edge.target), (edge.target, edge.source)):
            if near in allowed and far in nodes and nodes[far].session is None and may_see(nodes[far]):
                allowed.add(far)
    kept_edges, seen = [], set()
    for edge in edges:
        identity = (edge.source, edge.target, edge.type)
        if edge.source in allowed and edge.target in allowed and identity not in seen:
            seen.add(identity)
            kept_edges.append(edge)
    kept = [node for id, node in nodes.items() if id in allowed]
    return WebGraph(nodes=kept, edges=kept_edges, warnings=warnings)
