"""Causal chains: what an entity caused (successors) or what caused it (predecessors), hop by hop.

Causal edges are the relations whose type starts with `causal_`: `causal.edge.generated` events, mostly
proposed by the `causal` producer from a cited `outcome.explained`. Extraction keeps the two ends of a causal
claim as entities of type `cause` and `outcome`, so "A caused B" and "B caused C" leave `B` as two entities:
the outcome of the first claim and the cause of the second. The walk therefore follows *names*: it goes on
from every entity of the reached name in the session, whatever its type, which is what links the two
claims. A name is entered once, so a cycle ends the walk instead of looping.

Only entity versions and edges that hold at `as_of` (default: now) are walked, so a retracted or closed
causal edge is gone unless `as_of` asks for a time it held. Like `readmodels.graph.reads` and
`readmodels.graph.lookup`, the walk is a backend-neutral `Reading`, run with `GraphStore.read`.

The name is resolved the way search finds names: the exact name first, then the one name of the session
equal to it ignoring case, then the one name containing it ignoring case ("checkout p95 fell" finds
"Checkout p95 fell from 480 ms to 140 ms"). When no single name is found, the chain is empty and offers the
closest names (`suggestions`), so a caller can say "did you mean".
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Final, Literal, get_args

import msgspec

from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency
from readmodels.graph.cypher.io import Reading
from readmodels.graph.model import SNAKE_CASE, InvalidGraphWrite, canonical_ts
from readmodels.graph.reads import EDGE_COLUMNS, to_edge, window
from readmodels.graph.records import RelationEdge
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.model import (
    MAX_DEPTH,
    MAX_LIMIT,
    Citation,
    QueryError,
    check_after_wait,
    check_range,
)

Direction = Literal["successors", "predecessors"]
DIRECTIONS: Final[tuple[str, ...]] = get_args(Direction)
CAUSAL_PREFIX: Final = "causal_"
MAX_NAME_CHARS: Final = 512
"""Extraction stores names of at most 512 characters (`projectors.graph.extraction.NAME_LENGTH`)."""
DEFAULT_CAUSAL_DEPTH: Final = 3
DEFAULT_CAUSAL_LIMIT: Final = 20
MAX_SUGGESTIONS: Final = 5
MAX_NAMES_COMPARED: Final = 5000
_EVENT_URI: Final = re.compile(r"^eventloom://([A-Za-z0-9_-]{1,128})/events/([1-9][0-9]*)#([0-9a-f]{12})$")


class CausalRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Walk the causal edges of the entity `name` in `session`: out of it (`successors`, what it caused)
    or into it (`predecessors`, what caused it), up to `depth` hops and `limit` edges per hop."""

    session: str
    name: str
    direction: Direction
    entity_type: str | None = None
    """Only an entity of this type counts as the start (the walk then follows the name, see the module)."""
    depth: int = DEFAULT_CAUSAL_DEPTH
    as_of: str | None = None
    limit: int = DEFAULT_CAUSAL_LIMIT

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        if not SESSION_PATTERN.fullmatch(self.session):
            raise QueryError(
                f"session: expected 1 to 128 of A-Z, a-z, 0-9, '_' and '-', got {self.session!r}"
            )
        if not self.name.strip():
            raise QueryError("name: must not be empty")
        if len(self.name) > MAX_NAME_CHARS:
            raise QueryError(f"name: longer than {MAX_NAME_CHARS} characters")
        if self.direction not in DIRECTIONS:  # msgspec checks it on decode, not when built in Python
            raise QueryError(f"direction: expected one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        if self.entity_type is not None and not SNAKE_CASE.fullmatch(self.entity_type):
            raise QueryError(f"entity_type: expected snake_case, got {self.entity_type!r}")
        check_range("depth", self.depth, 1, MAX_DEPTH)
        check_range("limit", self.limit, 1, MAX_LIMIT)
        if self.as_of is not None:
            try:
                canonical_ts(self.as_of)
            except InvalidGraphWrite as exc:
                raise QueryError(f"as_of: {exc}") from None


class CausalEntity(msgspec.Struct, frozen=True):
    name: str
    entity_type: str
    summary: str | None = None
    """The entity's summary at `as_of`: a decision's title, an outcome's explanation."""


class CausalStep(msgspec.Struct, frozen=True, kw_only=True):
    """One causal edge reached `depth` hops from the start, always `cause -> effect` as the edge says."""

    depth: int
    cause: CausalEntity
    effect: CausalEntity
    relation_type: str
    confidence: float | None
    inference_method: str | None
    review_status: str | None
    authority_status: str | None
    edge_id: str | None
    valid_from: str
    valid_to: str | None
    citations: list[Citation]
    """The event that recorded the edge, then the log events its evidence cites."""
    authoritative: bool = False
    """A causal claim is an interpretation: context to weigh, never a fact to state."""


class CausalChain(msgspec.Struct, frozen=True, kw_only=True):
    """The request as asked, the entities its name matched (`start`) and the steps, nearest hop first."""

    session: str
    name: str
    direction: Direction
    entity_type: str | None
    depth: int
    as_of: str | None
    limit: int
    start: list[CausalEntity]
    steps: list[CausalStep]
    truncated: bool
    """Some hop had more than `limit` edges; the most confident were kept."""
    resolved_name: str | None = None
    """The entity name walked, when `name` matched it ignoring case or as a part."""
    suggestions: list[str] = msgspec.field(default_factory=list)
    """With no `start`: the session's names closest to `name`, best first."""
    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""


def causal_chain(request: CausalRequest) -> Reading[CausalChain]:
    """The causal chain of `request`; empty (`start=[]`, with `suggestions`) when no single entity name of
    the session matches, or none of that name holds at `as_of`."""
    start, resolved, suggestions = yield from resolve_start(
        request.session, request.name, request.entity_type, request.as_of
    )
    walked = request if resolved is None else msgspec.structs.replace(request, name=resolved)
    steps: list[CausalStep] = []
    truncated = False
    if start:
        steps, truncated = yield from _walk(walked)
    start, steps = yield from with_summaries(request.session, request.as_of, start, steps)
    return CausalChain(
        session=request.session,
        name=request.name,
        direction=request.direction,
        entity_type=request.entity_type,
        depth=request.depth,
        as_of=request.as_of,
        limit=request.limit,
        start=start,
        steps=steps,
        truncated=truncated,
        resolved_name=resolved if start else None,
        suggestions=[] if start else suggestions,
    )


def resolve_start(
    session: str, name: str, entity_type: str | None, as_of: str | None
) -> Reading[tuple[list[CausalEntity], str | None, list[str]]]:
    """(the entities `name` stands for at `as_of`, the name resolved when not `name` itself, the closest
    names when none): the exact name first, then the way search finds names (see the module)."""
    start = yield from _start(session, name, entity_type, as_of)
    resolved: str | None = None
    suggestions: list[str] = []
    if not start:
        resolved, suggestions = yield from _resolve_name(session, name)
        if resolved is not None:
            start = yield from _start(session, resolved, entity_type, as_of)
    return start, resolved if start else None, [] if start else suggestions


def _resolve_name(session: str, name: str) -> Reading[tuple[str | None, list[str]]]:
    """(the one name of the session `name` stands for, or None; the closest names otherwise)."""
    needle = " ".join(name.split()).lower()
    rows = yield (
        "MATCH (k:EntityKey) WHERE k.session = $session AND toLower(k.name) CONTAINS $needle "
        "RETURN DISTINCT k.name AS name ORDER BY name LIMIT $cap",
        {"session": session, "needle": needle, "cap": MAX_SUGGESTIONS + 1},
    )
    containing = [row["name"] for row in rows]
    same = sorted({name for name in containing if name.lower() == needle})
    if len(same) == 1:
        return same[0], []
    if len(containing) == 1:
        return containing[0], []
    if containing:
        return None, containing[:MAX_SUGGESTIONS]
    every = yield (
        "MATCH (k:EntityKey) WHERE k.session = $session RETURN DISTINCT k.name AS name LIMIT $cap",
        {"session": session, "cap": MAX_NAMES_COMPARED},
    )
    names = {row["name"].lower(): row["name"] for row in every}
    close = difflib.get_close_matches(needle, list(names), n=MAX_SUGGESTIONS, cutoff=0.5)
    return None, [names[name] for name in close]


def _start(
    session: str, name: str, entity_type: str | None, as_of: str | None
) -> Reading[list[CausalEntity]]:
    params: dict[str, Any] = {"session": session, "name": name}
    conditions = ["e.session = $session", "e.name = $name", window("e", as_of, params)]
    if entity_type is not None:
        params["entity_type"] = entity_type
        conditions.append("e.entity_type = $entity_type")
    rows = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} "
        "RETURN DISTINCT e.name AS name, e.entity_type AS entity_type ORDER BY entity_type",
        params,
    )
    return [CausalEntity(row["name"], row["entity_type"]) for row in rows]


def hop_statement(session: str, direction: Direction, as_of: str | None) -> tuple[str, dict[str, Any]]:
    """One hop's statement: the causal edges whose near end is named in `$names` and whose far end is not
    in `$visited`, most confident first, at most `$cap`. Asserted causal relations carry no confidence:
    they were stated, not inferred, so they rank as certain."""
    near, far = ("a", "b") if direction == "successors" else ("b", "a")
    params: dict[str, Any] = {"session": session, "prefix": CAUSAL_PREFIX}
    conditions = [
        f"{near}.session = $session",
        f"{near}.name IN $names",
        f"NOT ({far}.name IN $visited)",
        "r.relation_type STARTS WITH $prefix",
        window("r", as_of, params),  # an edge holds only while both its entities do
    ]
    statement = (
        f"MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE {' AND '.join(conditions)} "
        f"RETURN {EDGE_COLUMNS} "
        f"ORDER BY coalesce(r.confidence, 1.0) DESC, {near}.name, {far}.name, r.relation_type, r.uid "
        "LIMIT $cap"
    )
    return statement, params


def _walk(request: CausalRequest) -> Reading[tuple[list[CausalStep], bool]]:
    """Breadth first from the request's name; each hop reads at most `limit` edges (one more, to tell)."""
    statement, params = hop_statement(request.session, request.direction, request.as_of)
    successors = request.direction == "successors"
    visited = {request.name}
    frontier = [request.name]
    steps: list[CausalStep] = []
    truncated = False
    for depth in range(1, request.depth + 1):
        if not frontier:
            break
        hop = {"names": frontier, "visited": sorted(visited), "cap": request.limit + 1}
        rows = yield (statement, {**params, **hop})
        if len(rows) > request.limit:
            truncated = True
            rows = rows[: request.limit]
        edges = [to_edge(row) for row in rows]
        steps.extend(to_step(edge, depth) for edge in edges)
        reached = {edge.target_name if successors else edge.source_name for edge in edges}
        visited |= reached
        frontier = sorted(reached)
    return steps, truncated


def to_step(edge: RelationEdge, depth: int) -> CausalStep:
    return CausalStep(
        depth=depth,
        cause=CausalEntity(edge.source_name, edge.source_entity_type),
        effect=CausalEntity(edge.target_name, edge.target_entity_type),
        relation_type=edge.relation_type,
        confidence=edge.confidence,
        inference_method=edge.inference_method,
        review_status=edge.review_status,
        authority_status=edge.authority_status,
        edge_id=edge.edge_id,
        valid_from=edge.valid_from,
        valid_to=edge.valid_to,
        citations=edge_citations(edge),
    )


def edge_citations(edge: RelationEdge) -> list[Citation]:
    """The event that recorded the edge, then each evidence citation that names a log event.

    Evidence is stored as parallel lists that each keep only the items having that field, so a URI is
    matched to its full hash by the URI's 12-hex prefix; without a match the prefix is the best known hash.
    Evidence citing something other than a log event (a web page, a ticket) has no place in a `Citation`.
    """
    cited = [event_citation(edge.session, edge.source_event_seq, edge.source_event_hash)]
    full_hashes = {event_hash[:12]: event_hash for event_hash in edge.evidence_event_hashes}
    for uri in edge.evidence_citations:
        match = _EVENT_URI.fullmatch(uri)
        if match is None:
            continue
        session, seq, short_hash = match.groups()
        cited.append(
            Citation(uri=uri, session=session, seq=int(seq), hash=full_hashes.get(short_hash, short_hash))
        )
    return list({c.uri: c for c in cited}.values())


def with_summaries(
    session: str, as_of: str | None, start: list[CausalEntity], steps: list[CausalStep]
) -> Reading[tuple[list[CausalEntity], list[CausalStep]]]:
    """`start` and `steps` with each entity's summary at `as_of` (one read for all of them)."""
    names = sorted({e.name for e in start} | {e.name for s in steps for e in (s.cause, s.effect)})
    if not names:
        return start, steps
    params: dict[str, Any] = {"session": session, "names": names}
    rows = yield (
        "MATCH (e:Entity) WHERE e.session = $session AND e.name IN $names AND "
        f"{window('e', as_of, params)} RETURN e.name AS name, e.entity_type AS type, e.summary AS summary",
        params,
    )
    summaries = {(row["name"], row["type"]): row["summary"] for row in rows}

    def summed(entity: CausalEntity) -> CausalEntity:
        return CausalEntity(entity.name, entity.entity_type, summaries.get((entity.name, entity.entity_type)))

    steps = [
        msgspec.structs.replace(step, cause=summed(step.cause), effect=summed(step.effect)) for step in steps
    ]
    return [summed(entity) for entity in start], steps
