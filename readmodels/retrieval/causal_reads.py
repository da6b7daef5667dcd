"""Causal paths (how did A lead to B?) and explanations (why did outcome X happen?), over causal edges.

Both build on `readmodels.retrieval.causal_chains`: names resolve the same way (exact, ignoring case, a
part of the name, else "did you mean"), only what holds at `as_of` is read, the walk follows names, and every
step carries its citations (the event that recorded the edge, then the events its evidence cites).

- **path**: the shortest causal paths from entity `source` to entity `target`, at most `depth` edges long,
  each step `cause -> effect`. Breadth first from `source` along causal edges; a name is entered once, at
  the hop it is first reached, so every path returned is a shortest one; at most `limit` paths.
- **explain**: the outcomes `name` stands for (the entity itself when it is an outcome, and every outcome
  that `concerns` it, so "auth-service" finds the outage of auth-service), their causal predecessors hop by
  hop, and the `outcome.explained` explanations recorded for each outcome met (those explained and those on
  their chains), each cited by the explaining event and the cause event it names.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency
from readmodels.graph.cypher.io import Reading
from readmodels.graph.identity import decode_json
from readmodels.graph.model import SNAKE_CASE, InvalidGraphWrite, canonical_ts
from readmodels.graph.reads import to_edge, window
from readmodels.graph.records import RelationEdge
from readmodels.retrieval.causal_chains import (
    DEFAULT_CAUSAL_DEPTH,
    DEFAULT_CAUSAL_LIMIT,
    MAX_NAME_CHARS,
    CausalEntity,
    CausalRequest,
    CausalStep,
    causal_chain,
    hop_statement,
    resolve_start,
    to_step,
    with_summaries,
)
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.model import (
    MAX_DEPTH,
    MAX_LIMIT,
    Citation,
    QueryError,
    check_after_wait,
    check_range,
)

DEFAULT_PATH_LIMIT: Final = 5
MAX_PATH_LIMIT: Final = 20
HOP_CAP: Final = 500
"""Edges read per hop of a path search: a path is never missed because a hop had more edges than `limit`."""
CONCERNS: Final = "concerns"
OUTCOME: Final = "outcome"
EXPLAINED: Final = "outcome.explained"


def _check(session: str, names: dict[str, str], as_of: str | None) -> None:
    if not SESSION_PATTERN.fullmatch(session):
        raise QueryError(f"session: expected 1 to 128 of A-Z, a-z, 0-9, '_' and '-', got {session!r}")
    for field, name in names.items():
        if not name.strip():
            raise QueryError(f"{field}: must not be empty")
        if len(name) > MAX_NAME_CHARS:
            raise QueryError(f"{field}: longer than {MAX_NAME_CHARS} characters")
    if as_of is not None:
        try:
            canonical_ts(as_of)
        except InvalidGraphWrite as exc:
            raise QueryError(f"as_of: {exc}") from None


class CausalPathRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The causal paths in `session` from the entity `source` (a cause) to the entity `target` (an
    effect), at most `depth` edges long; at most `limit` paths."""

    session: str
    source: str
    target: str
    depth: int = MAX_DEPTH
    as_of: str | None = None
    limit: int = DEFAULT_PATH_LIMIT

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        _check(self.session, {"source": self.source, "target": self.target}, self.as_of)
        check_range("depth", self.depth, 1, MAX_DEPTH)
        check_range("limit", self.limit, 1, MAX_PATH_LIMIT)


class CausalPath(msgspec.Struct, frozen=True):
    steps: list[CausalStep]
    """From the source to the target, `depth` 1, 2, ..."""


class CausalPaths(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    source: str
    target: str
    depth: int
    as_of: str | None
    limit: int
    source_entities: list[CausalEntity]
    target_entities: list[CausalEntity]
    paths: list[CausalPath]
    truncated: bool
    """More shortest paths than `limit`, or a hop with more than `HOP_CAP` edges."""
    resolved_source: str | None = None
    resolved_target: str | None = None
    suggestions: dict[str, list[str]] = msgspec.field(default_factory=dict)
    """For `source` or `target` when no entity matched: the session's closest names."""
    authoritative: bool = False
    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""


def causal_paths(request: CausalPathRequest) -> Reading[CausalPaths]:
    """The shortest causal paths of `request` (none when an end resolves to no entity)."""
    source, resolved_source, source_close = yield from resolve_start(
        request.session, request.source, None, request.as_of
    )
    target, resolved_target, target_close = yield from resolve_start(
        request.session, request.target, None, request.as_of
    )
    paths: list[CausalPath] = []
    truncated = False
    if source and target:
        start = resolved_source or request.source
        goal = resolved_target or request.target
        parents, truncated = yield from _reach(request, start, goal)
        paths, more = _unwind(parents, start, goal, request.limit)
        truncated = truncated or more
        steps = [step for path in paths for step in path.steps]
        source, steps = yield from with_summaries(request.session, request.as_of, source, steps)
        target, _ = yield from with_summaries(request.session, request.as_of, target, [])
        paths = _regroup(paths, steps)
    suggestions = {k: v for k, v in (("source", source_close), ("target", target_close)) if v}
    return CausalPaths(
        session=request.session,
        source=request.source,
        target=request.target,
        depth=request.depth,
        as_of=request.as_of,
        limit=request.limit,
        source_entities=source,
        target_entities=target,
        paths=paths,
        truncated=truncated,
        resolved_source=resolved_source,
        resolved_target=resolved_target,
        suggestions=suggestions,
    )


def _reach(
    request: CausalPathRequest, start: str, goal: str
) -> Reading[tuple[dict[str, list[RelationEdge]], bool]]:
    """Breadth first from `start` until `goal` is reached: for each name reached, the edges that reached
    it from the hop before (so only shortest paths). True when a hop read `HOP_CAP` edges or more."""
    statement, params = hop_statement(request.session, "successors", request.as_of)
    parents: dict[str, list[RelationEdge]] = {}
    visited, frontier = {start}, [start]
    capped = False
    for _ in range(request.depth):
        if not frontier or goal in parents:
            break
        hop = {"names": frontier, "visited": sorted(visited), "cap": HOP_CAP}
        rows = yield (statement, {**params, **hop})
        capped = capped or len(rows) >= HOP_CAP
        for edge in (to_edge(row) for row in rows):
            parents.setdefault(edge.target_name, []).append(edge)
        frontier = sorted({name for name in parents if name not in visited})
        visited |= set(frontier)
    return parents, capped


def _unwind(
    parents: dict[str, list[RelationEdge]], start: str, goal: str, limit: int
) -> tuple[list[CausalPath], bool]:
    """Every path from `start` to `goal` through `parents`, most confident first edge at each hop; at most
    `limit` (True when there were more)."""
    found: list[list[RelationEdge]] = []

    def back(name: str, tail: list[RelationEdge]) -> None:
        if len(found) > limit:
            return
        if name == start:
            found.append(tail)
            return
        for edge in parents.get(name, []):  # each a hop nearer `start`: no name comes twice
            back(edge.source_name, [edge, *tail])

    if goal != start:
        back(goal, [])
    paths = [CausalPath([to_step(edge, depth) for depth, edge in enumerate(p, 1)]) for p in found[:limit]]
    return paths, len(found) > limit


def _regroup(paths: list[CausalPath], steps: list[CausalStep]) -> list[CausalPath]:
    """`paths` again, with the summarised `steps` in the same order."""
    regrouped: list[CausalPath] = []
    at = 0
    for path in paths:
        regrouped.append(CausalPath(steps[at : at + len(path.steps)]))
        at += len(path.steps)
    return regrouped


class CausalExplainRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Why the outcomes `name` stands for happened: their causal predecessors up to `depth` hops (at most
    `limit` edges per hop) and their recorded explanations."""

    session: str
    name: str
    entity_type: str | None = None
    depth: int = DEFAULT_CAUSAL_DEPTH
    as_of: str | None = None
    limit: int = DEFAULT_CAUSAL_LIMIT

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        _check(self.session, {"name": self.name}, self.as_of)
        if self.entity_type is not None and not SNAKE_CASE.fullmatch(self.entity_type):
            raise QueryError(f"entity_type: expected snake_case, got {self.entity_type!r}")
        check_range("depth", self.depth, 1, MAX_DEPTH)
        check_range("limit", self.limit, 1, MAX_LIMIT)


class OutcomeExplanation(msgspec.Struct, frozen=True, kw_only=True):
    """One `outcome.explained`: what it said about the outcome, and the events it cites."""

    outcome: str
    explanation: str | None
    taxonomy: str | None
    confidence: float | None
    recorded_at: str
    citations: list[Citation]
    """The explaining event, then the cause event it names."""


class CausalExplanation(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    name: str
    entity_type: str | None
    depth: int
    as_of: str | None
    limit: int
    start: list[CausalEntity]
    outcomes: list[CausalEntity]
    """The outcomes explained: `name` itself when it is an outcome, and those that concern it."""
    steps: list[CausalStep]
    """The causal predecessors of the outcomes, nearest hop first (duplicates reached twice dropped)."""
    explanations: list[OutcomeExplanation]
    truncated: bool
    resolved_name: str | None = None
    suggestions: list[str] = msgspec.field(default_factory=list)
    authoritative: bool = False
    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""


def causal_explanation(request: CausalExplainRequest) -> Reading[CausalExplanation]:
    """The explanation of `request` (empty, with `suggestions`, when no entity name matches)."""
    start, resolved, suggestions = yield from resolve_start(
        request.session, request.name, request.entity_type, request.as_of
    )
    outcomes: list[CausalEntity] = [e for e in start if e.entity_type == OUTCOME]
    if start:
        concerned = yield from _concerning(request, resolved or request.name)
        outcomes += [e for e in concerned if e not in outcomes]
    steps: list[CausalStep] = []
    truncated = False
    for outcome in outcomes:
        chain = yield from causal_chain(_chain_request(request, outcome.name))
        steps += [s for s in chain.steps if not any(_same(s, kept) for kept in steps)]
        truncated = truncated or chain.truncated
    explained = {o.name for o in outcomes} | {
        e.name for s in steps for e in (s.cause, s.effect) if e.entity_type == OUTCOME
    }
    explanations = yield from _explanations(request, sorted(explained))
    start, steps = yield from with_summaries(request.session, request.as_of, start, steps)
    outcomes, _ = yield from with_summaries(request.session, request.as_of, outcomes, [])
    return CausalExplanation(
        session=request.session,
        name=request.name,
        entity_type=request.entity_type,
        depth=request.depth,
        as_of=request.as_of,
        limit=request.limit,
        start=start,
        outcomes=outcomes,
        steps=sorted(steps, key=lambda s: s.depth),
        explanations=explanations,
        truncated=truncated,
        resolved_name=resolved,
        suggestions=suggestions,
    )


def _chain_request(request: CausalExplainRequest, outcome: str) -> CausalRequest:
    return CausalRequest(
        session=request.session,
        name=outcome,
        direction="predecessors",
        depth=request.depth,
        as_of=request.as_of,
        limit=request.limit,
    )


def _same(one: CausalStep, other: CausalStep) -> bool:
    return (one.cause, one.effect, one.relation_type, one.edge_id) == (
        other.cause,
        other.effect,
        other.relation_type,
        other.edge_id,
    )


def _concerning(request: CausalExplainRequest, name: str) -> Reading[list[CausalEntity]]:
    """The outcomes with a `concerns` edge to an entity named `name` (of `entity_type`, when given)."""
    params: dict[str, Any] = {"session": request.session, "name": name, "rel": CONCERNS, "type": OUTCOME}
    conditions = [
        "x.session = $session",
        "x.name = $name",
        "o.entity_type = $type",
        "r.relation_type = $rel",
        window("r", request.as_of, params),  # an edge holds only while both its entities do
    ]
    if request.entity_type is not None:
        params["entity_type"] = request.entity_type
        conditions.append("x.entity_type = $entity_type")
    rows = yield (
        f"MATCH (o:EntityKey)-[r:RELATES]->(x:EntityKey) WHERE {' AND '.join(conditions)} "
        "RETURN DISTINCT o.name AS name ORDER BY name LIMIT $cap",
        {**params, "cap": request.limit},
    )
    return [CausalEntity(row["name"], OUTCOME) for row in rows]


def _explanations(request: CausalExplainRequest, outcomes: list[str]) -> Reading[list[OutcomeExplanation]]:
    """Every version of the outcomes an `outcome.explained` recorded up to `as_of`, oldest first."""
    if not outcomes:
        return []
    params: dict[str, Any] = {"session": request.session, "names": outcomes, "type": OUTCOME, "ev": EXPLAINED}
    conditions = [
        "e.session = $session",
        "e.name IN $names",
        "e.entity_type = $type",
        "e.source_event_type = $ev",
    ]
    if request.as_of is not None:
        params["as_of"] = canonical_ts(request.as_of)
        conditions.append("e.valid_from <= $as_of")
    rows = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN e.name AS name, e.summary AS summary, "
        "e.properties AS properties, e.valid_from AS valid_from, e.source_event_seq AS seq, "
        "e.source_event_hash AS hash ORDER BY valid_from, name",
        params,
    )
    return [_explanation(request.session, row) for row in rows]


def _explanation(session: str, row: dict[str, Any]) -> OutcomeExplanation:
    properties = decode_json(row["properties"])
    citations = [event_citation(session, row["seq"], row["hash"])]
    cause_seq, cause_hash = properties.get("cause_event_seq"), properties.get("cause_event_hash")
    if isinstance(cause_seq, int) and isinstance(cause_hash, str):
        citations.append(event_citation(session, cause_seq, cause_hash))
    confidence = properties.get("confidence")
    return OutcomeExplanation(
        outcome=row["name"],
        explanation=row["summary"],
        taxonomy=properties.get("taxonomy"),
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        recorded_at=row["valid_from"],
        citations=citations,
    )
