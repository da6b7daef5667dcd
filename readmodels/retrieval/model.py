"""What retrieval is asked and answers: plain msgspec Structs, the same in Python and on the wire.

A hit is about one of three things: an `entity` (its version valid at the asked time), an `event` (what
an agent said, ran, decided or explained, verbatim) or a `source` span (a document or code chunk with
its lines). Every hit carries its citations into the log and the explanation of its score.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency, after_wait_problem
from readmodels.retrieval.fusion import DEFAULT_PROFILE, LANES, PROFILES, Contribution, Fusion, Lane

HitKind = Literal["entity", "event", "source"]
MAX_QUERY_CHARS: Final = 4096
MAX_LIMIT: Final = 100
MAX_DEPTH: Final = 5
DEFAULT_LIMIT: Final = 10
DEFAULT_DEPTH: Final = 1


class QueryError(ValueError):
    """A query that cannot be answered as asked (the message names the field)."""


def check_question(text: str, profile: str) -> None:
    """The checks every question shares (a query, a checkout); errors name the field."""
    if not text.strip():
        raise QueryError("text: must not be empty")
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(f"text: longer than {MAX_QUERY_CHARS} characters")
    if profile not in PROFILES:
        raise QueryError(f"profile: expected one of {', '.join(PROFILES)}, got {profile!r}")


def check_after_wait(wait_ms: int) -> None:
    problem = after_wait_problem(wait_ms)
    if problem is not None:
        raise QueryError(problem)


def check_range(field: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise QueryError(f"{field}: must be between {low} and {high}, got {value}")


class Query(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A question to memory. `as_of` (RFC 3339) asks what was true then; `lanes` restricts the lanes."""

    text: str
    session: str | None = None
    """Only this session's memory: a hit citing an event of another session (a consolidation proposal
    made from two sessions, an entity merged by `same_as` with another session's) is left out."""
    as_of: str | None = None
    limit: int = DEFAULT_LIMIT
    profile: str = DEFAULT_PROFILE
    lanes: list[Lane] | None = None
    fusion: Fusion | None = None
    """Overrides the profile's fusion (`rrf` or `score`)."""
    depth: int = DEFAULT_DEPTH
    include_inferred: bool = True

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        check_question(self.text, self.profile)
        check_range("limit", self.limit, 1, MAX_LIMIT)
        check_range("depth", self.depth, 0, MAX_DEPTH)
        if self.lanes is not None and (not self.lanes or set(self.lanes) - set(LANES)):
            raise QueryError(f"lanes: expected a non-empty list of {', '.join(LANES)}")


class Citation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An event of the log (`uri` = eventloom://session/events/seq#hash12), and a source span if known."""

    uri: str
    session: str
    seq: int
    hash: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None


class Explanation(msgspec.Struct, frozen=True, kw_only=True):
    """How the score was made: the profile's fusion and, per lane, raw score, rank, weight, contribution."""

    profile: str
    fusion: str
    lanes: dict[str, Contribution]
    notes: list[str] = msgspec.field(default_factory=list)
    base: float = 0.0
    """Calibrated fusion: the part of the logit that is no lane's (bias, kind, recency); the score is
    `1 / (1 + exp(-(base + sum of the contributions)))`. Other fusions: 0, the score is the sum."""


class InferredLink(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """The inferred or causal edge through which traversal reached a hit: non-authoritative context."""

    source: str
    relation_type: str
    target: str
    kind: Literal["inferred", "causal"]
    confidence: float
    method: str
    trust: float
    citation: str
    cited_source: bool | None = None
    """Whether the edge cites the event it was derived from (seq and hash): its provenance; None when
    not known (older replies)."""


class Proposal(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Set on a hit that a derived event asserted (a consolidation candidate, an end of a causal edge), or
    on an entity asserted as an agent's claim (`claimed_by`): a proposal, with its review status, never a
    fact."""

    status: str
    source_event_type: str
    confidence: float | None = None
    method: str | None = None
    claimed_by: str | None = None
    """Set when the entity is an agent's claim (its property `asserted_as` is `claim`): who claimed it."""
    candidate_type: str | None = None
    """Set on a consolidation candidate: what it proposes (`claim`, `procedure`, `episode`, ...)."""
    edge: InferredLink | None = None
    """Set when the derived event created an inferred or causal edge: that edge, with its own confidence,
    method and trust (the derived event's text and the entities it named do not carry them). `status` is
    then `closed` when the edge no longer held at the asked time (retracted, or re-asserted by a review)."""


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    kind: HitKind
    session: str
    entity: str
    """The entity's name; for an event, its title (speaker, command, decision); for a source, its path."""
    type: str
    """The entity type; for an event or a source, the event type it came from."""
    summary: str
    valid_from: str
    valid_to: str | None
    score: float
    explanation: Explanation
    citations: list[Citation]
    version: int | None = None
    superseded_versions: int = 0
    """Older versions of this entity that the answer leaves out (they no longer held at the asked time)."""
    inferred: InferredLink | None = None
    """Set when the hit was reached only through an inferred or causal edge."""
    proposal: Proposal | None = None
    """Set when what the hit says comes from a derived event (`DERIVED_EVENT_TYPES` in the catalogue)."""


class Invalidation(msgspec.Struct, frozen=True, kw_only=True):
    """An entity the question reached that stopped holding (and was not asserted again) by the asked time."""

    entity: str
    type: str
    session: str
    invalid_at: str
    statement: str
    """What the invalidating event says (its one-line summary, with the reason it gave)."""
    citation: Citation


class TaskState(msgspec.Struct, frozen=True, kw_only=True):
    """Where a task stands at the asked time, from the graph: `open` (proposed), `claimed` (by `assignee`),
    `done`, or the status its events gave; `blocked_by` names the tasks it depends on that are not done."""

    task: str
    session: str
    title: str
    status: str
    assignee: str | None
    blocked_by: list[str]
    since: str
    citation: Citation


class LaneReport(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    lane: str
    candidates: int
    ms: float
    error: str | None = None


class QueryResult(msgspec.Struct, frozen=True, kw_only=True):
    query: Query
    hits: list[Hit]
    lanes: list[LaneReport]
    warnings: list[str]
    excluded_not_current: int
    """Candidates left out because no version of them held at the asked time (superseded or invalidated),
    and events whose every asserted entity no longer held then."""
    ms: float
    invalidated: list[Invalidation] = msgspec.field(default_factory=list)
    """The invalidations that closed entities the question reached, newest first (cited)."""
    work: list[TaskState] = msgspec.field(default_factory=list)
    """The tasks among the hits, and when the question asks about work (what is left, open, blocked, who
    works on what), the unfinished tasks in scope: where each stands, its owner and its blockers."""

    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""
