"""The Memory Checkout: what an agent pastes into its prompt, and everything needed to trust it.

Facts are current (or as of the asked time) entity versions; snippets are verbatim text from the log;
inferred and causal context is marked non-authoritative with its trust. Every item points into
`evidence`, the numbered list of cited events, so the prompt can say "[2]" and a reader can follow it.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency
from readmodels.retrieval.fusion import DEFAULT_PROFILE
from readmodels.retrieval.model import Citation, check_after_wait, check_question, check_range

DEFAULT_TOKEN_BUDGET: Final = 1500
MIN_TOKEN_BUDGET: Final = 200
MAX_TOKEN_BUDGET: Final = 100_000
DEFAULT_CONSIDERED: Final = 20
MAX_CONSIDERED: Final = 100


class CheckoutRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    text: str
    session: str | None = None
    as_of: str | None = None
    profile: str = DEFAULT_PROFILE
    limit: int = DEFAULT_CONSIDERED
    """How many retrieval hits to consider (the token budget decides how many make it in)."""
    token_budget: int = DEFAULT_TOKEN_BUDGET
    include_inferred: bool = True

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        check_question(self.text, self.profile)
        check_range("limit", self.limit, 1, MAX_CONSIDERED)
        check_range("token_budget", self.token_budget, MIN_TOKEN_BUDGET, MAX_TOKEN_BUDGET)


class Fact(msgspec.Struct, frozen=True, kw_only=True):
    entity: str
    type: str
    summary: str
    valid_from: str
    valid_to: str | None
    version: int | None
    score: float
    evidence: list[int]
    """Indexes (1-based) into `MemoryCheckout.evidence`."""


class Snippet(msgspec.Struct, frozen=True, kw_only=True):
    """Verbatim text from the log: what was said, run, decided, explained, or a cited source span."""

    title: str
    type: str
    text: str
    ts: str
    score: float
    evidence: list[int]


class WorkItem(msgspec.Struct, frozen=True, kw_only=True):
    """A task and where it stands: `open`, `claimed` (by `assignee`), `done`, or its events' own status."""

    task: str
    title: str
    status: str
    assignee: str | None
    blocked_by: list[str]
    since: str
    evidence: list[int]


class NoLongerTrue(msgspec.Struct, frozen=True, kw_only=True):
    """An entity the question reached that was invalidated: say it stopped holding, never state it."""

    entity: str
    type: str
    invalid_at: str
    statement: str
    evidence: list[int]


class InferredContext(msgspec.Struct, frozen=True, kw_only=True):
    """A proposal (a consolidation candidate, what a causal or inferred edge asserted) or an inferred or
    causal link: context to weigh, with its review `status`, never a fact to state."""

    statement: str
    kind: Literal["proposed", "inferred", "causal"]
    about: str
    confidence: float
    trust: float
    method: str
    evidence: list[int]
    authoritative: bool = False
    status: str = "proposed"


LeftOutReason = Literal[
    "below_trust_floor", "token_budget", "rejected_or_retracted", "no_longer_holds", "promoted"
]
"""Why a link or proposal the question reached is not in the prompt: its trust is under `TRUST_FLOOR`
(`readmodels.checkout.context_report`), it did not fit the budget, a reviewer rejected or retracted it, its
edge no longer held at the asked time (retracted or superseded since: stale), or (a consolidation
candidate) it was promoted and answers as memory."""


class EdgeContext(msgspec.Struct, frozen=True, kw_only=True):
    """The inferred (or causal) edges a checkout considered: which, how sure, what was left out and why.

    `considered` counts every edge the question reached (a hit reached through it, or the event that
    proposed it), `by_relation` and `by_method` break that down; the confidence and trust figures are over
    the `shown` ones (what the prompt holds), `weakest` names the shown edge of lowest trust, and
    `guidance` is set when that trust is low (`LOW_TRUST`)."""

    considered: int = 0
    shown: int = 0
    by_relation: dict[str, int] = msgspec.field(default_factory=dict)
    by_method: dict[str, int] = msgspec.field(default_factory=dict)
    average_confidence: float | None = None
    lowest_confidence: float | None = None
    average_trust: float | None = None
    lowest_trust: float | None = None
    weakest: str | None = None
    left_out: dict[str, int] = msgspec.field(default_factory=dict)
    """By `LeftOutReason`."""
    missing_provenance: int = 0
    """Considered edges that do not cite the event they were derived from (their trust is discounted)."""
    guidance: str | None = None


class ConsolidationContext(msgspec.Struct, frozen=True, kw_only=True):
    """The consolidation candidates the question reached: proposals awaiting review, never facts."""

    pending: int = 0
    """Candidates still awaiting review (any status but rejected, retracted or promoted)."""
    by_type: dict[str, int] = msgspec.field(default_factory=dict)
    """The pending ones by `candidate_type` (`unknown` when a candidate names none)."""
    shown: int = 0
    """Pending candidates shown as PROPOSED lines."""
    left_out: dict[str, int] = msgspec.field(default_factory=dict)
    """Candidates reached but not shown, by `LeftOutReason`."""
    note: str = "pending consolidation candidates are proposals awaiting review, never facts"


class Answerability(msgspec.Struct, frozen=True, kw_only=True):
    answer_from_memory: bool
    refresh_recommended: bool
    ask_user: bool
    reasons: list[str]


class Diagnostics(msgspec.Struct, frozen=True, kw_only=True):
    lanes_used: list[str]
    lane_candidates: dict[str, int]
    lane_errors: dict[str, str]
    hits_considered: int
    facts: int
    snippets: int
    inferred_context: int
    superseded_excluded: int
    left_out_for_budget: int
    tokens: int
    token_budget: int
    retrieval_ms: float


class MemoryCheckout(msgspec.Struct, frozen=True, kw_only=True):
    request: CheckoutRequest
    facts: list[Fact]
    snippets: list[Snippet]
    inferred: list[InferredContext]
    evidence: list[Citation]
    no_longer_true: list[NoLongerTrue] = msgspec.field(default_factory=list)
    work: list[WorkItem] = msgspec.field(default_factory=list)
    superseded_excluded: int
    """Versions and entities left out because they no longer held at the asked time."""
    answerability: Answerability
    guidance: list[str]
    warnings: list[str]
    diagnostics: Diagnostics
    inferred_context: EdgeContext = msgspec.field(default_factory=EdgeContext)
    """The inferred edges considered: counts, trust, what was left out and why (`diagnostics.inferred_context`
    stays the count of inferred and causal items shown)."""
    causal_context: EdgeContext = msgspec.field(default_factory=EdgeContext)
    consolidation: ConsolidationContext = msgspec.field(default_factory=ConsolidationContext)
    prompt: str
    """The bundle as prompt text, within `request.token_budget` tokens (see `readmodels.checkout.budget`)."""

    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""
