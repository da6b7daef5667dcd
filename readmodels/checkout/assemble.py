"""`assemble_context`: a question in, a prompt-ready, cited Memory Checkout out.

Hits become facts (entities found on their own, with something asserted about them), snippets (verbatim
events and source spans), work state (tasks: where each stands, its owner, its blockers) and inferred
context (entities reached only through an inferred or causal edge, and the inferred links of facts); the
invalidations the question reached are shown as no longer true. Answerability (`answerability`) is
decided from what made it into the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from readmodels.checkout.answerability import answerability_of
from readmodels.checkout.budget import clip, estimate_tokens
from readmodels.checkout.context_items import ContextPlacer, flat
from readmodels.checkout.context_report import (
    ContextTally,
    consolidation_context,
    diagnostic_lines,
    edge_context,
)
from readmodels.checkout.model import (
    Answerability,
    CheckoutRequest,
    ConsolidationContext,
    Diagnostics,
    EdgeContext,
    Fact,
    InferredContext,
    MemoryCheckout,
    NoLongerTrue,
    Snippet,
    WorkItem,
)
from readmodels.checkout.prompt import PromptBuilder
from readmodels.retrieval.model import Hit, Invalidation, Query, QueryResult, TaskState
from readmodels.retrieval.protocol import Memory
from readmodels.retrieval.work import TASK_TYPE, work_intent

MAX_QUESTION_TOKENS: Final = 80
DIAGNOSTICS_TITLE: Final = (
    "## Context diagnostics (links and proposals: shown, left out and why; not evidence)"
)
MAX_DIAGNOSTIC_TOKENS: Final = 80
CONTEXT_TITLE: Final = (
    "## Proposed, inferred and causal (NOT authoritative: proposals and links awaiting review)"
)


async def assemble_context(memory: Memory, request: CheckoutRequest) -> MemoryCheckout:
    query = Query(
        text=request.text,
        session=request.session,
        as_of=request.as_of,
        limit=request.limit,
        profile=request.profile,
        include_inferred=request.include_inferred,
        after=request.after,
        after_wait_ms=request.after_wait_ms,
    )
    return checkout_from(await memory.query(query), request)


def _only_inferred(hit: Hit) -> bool:
    return hit.inferred is not None and set(hit.explanation.lanes) == {"traversal"}


def _window(hit: Hit) -> str:
    return f"valid {hit.valid_from} to {hit.valid_to}" if hit.valid_to else f"since {hit.valid_from}"


@dataclass
class _Placed:
    """What made it into the prompt, by section, and the hits behind the facts and snippets."""

    facts: list[Fact] = field(default_factory=list)
    no_longer_true: list[NoLongerTrue] = field(default_factory=list)
    work: list[WorkItem] = field(default_factory=list)
    snippets: list[Snippet] = field(default_factory=list)
    inferred: list[InferredContext] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    tally: ContextTally = field(default_factory=ContextTally)

    def sections(self) -> set[str]:
        """The sections with something in them that the guidance speaks of."""
        return {name for name, items in (("inferred", self.inferred), ("gone", self.no_longer_true)) if items}


@dataclass(frozen=True)
class _ContextReports:
    """The checkout's account of its non-authoritative context (`context_report`)."""

    inferred: EdgeContext
    causal: EdgeContext
    consolidation: ConsolidationContext

    @classmethod
    def of(cls, tally: ContextTally) -> _ContextReports:
        return cls(
            inferred=edge_context("inferred", tally.of_kind("inferred")),
            causal=edge_context("causal", tally.of_kind("causal")),
            consolidation=consolidation_context(tally.candidates),
        )

    def guidance(self) -> list[str]:
        return [report.guidance for report in (self.inferred, self.causal) if report.guidance]


def _guidance_reserve(request: CheckoutRequest) -> int:
    """The tokens the longest guidance may take: kept free while items are placed, so it always fits (the
    low-trust guidance is reserved by the first edge of each kind shown, `ContextPlacer`)."""
    worst = Answerability(answer_from_memory=False, refresh_recommended=True, ask_user=False, reasons=[])
    longest = _guidance_lines(_guidance(request, worst, {"inferred", "gone"}, 10**9, 10**9))
    return estimate_tokens("\n".join(longest)) + 1


def checkout_from(result: QueryResult, request: CheckoutRequest) -> MemoryCheckout:
    builder = PromptBuilder(
        budget=request.token_budget, header=_header(request), reserve=_guidance_reserve(request)
    )
    placed = _place(builder, result, request)
    superseded = result.excluded_not_current + sum(
        h.superseded_versions for h in placed.hits if h.kind == "entity" and h.type != TASK_TYPE
    )  # a task's earlier versions are its status steps, shown as its work state, not left out
    answerability = answerability_of(
        result, request, placed.hits, placed.inferred, len(placed.work), builder.left_out
    )
    reports = _ContextReports.of(placed.tally)
    guidance = _guidance(request, answerability, placed.sections(), superseded, builder.left_out)
    guidance += reports.guidance()
    builder.header += _guidance_lines(guidance)  # fits: its longest form was reserved
    builder.reserve = 0
    _add_diagnostics(builder, reports)  # after everything else: only in the room left
    return MemoryCheckout(
        request=request,
        facts=placed.facts,
        snippets=placed.snippets,
        inferred=placed.inferred,
        evidence=builder.evidence,
        no_longer_true=placed.no_longer_true,
        work=placed.work,
        superseded_excluded=superseded,
        answerability=answerability,
        guidance=guidance,
        warnings=result.warnings,
        consistency=result.consistency,
        diagnostics=_diagnostics(result, request, placed, builder, superseded),
        inferred_context=reports.inferred,
        causal_context=reports.causal,
        consolidation=reports.consolidation,
        prompt=builder.text(),
    )


def _add_diagnostics(builder: PromptBuilder, reports: _ContextReports) -> None:
    """The compact diagnostics section, a line at a time while the budget has room (never instead of an
    item: every item was placed before it)."""
    section = builder.section(DIAGNOSTICS_TITLE)
    for line in diagnostic_lines(reports.inferred, reports.causal, reports.consolidation):
        builder.try_add_note(section, clip(line, MAX_DIAGNOSTIC_TOKENS))


def _diagnostics(
    result: QueryResult, request: CheckoutRequest, placed: _Placed, builder: PromptBuilder, superseded: int
) -> Diagnostics:
    return Diagnostics(
        lanes_used=[r.lane for r in result.lanes if r.error is None],
        lane_candidates={r.lane: r.candidates for r in result.lanes},
        lane_errors={r.lane: r.error for r in result.lanes if r.error is not None},
        hits_considered=len(result.hits),
        facts=len(placed.facts),
        snippets=len(placed.snippets),
        inferred_context=len(placed.inferred),
        superseded_excluded=superseded,
        left_out_for_budget=builder.left_out,
        tokens=builder.tokens,
        token_budget=request.token_budget,
        retrieval_ms=result.ms,
    )


def _place(builder: PromptBuilder, result: QueryResult, request: CheckoutRequest) -> _Placed:
    """Items go in best-ranked first, each into its section, while the budget lasts: a small budget keeps
    the most relevant items, whatever their section. A task shows as its work state (first, when the
    question asks about work); what the question reached that no longer holds comes after the hits, and
    inferred context last (it is never authoritative)."""
    placer = _Placer(builder, request)
    work_of = {(task.session, task.task): task for task in result.work}
    if work_intent(request.text):
        for task in result.work:
            placer.work(task)

    def entity(hit: Hit) -> None:
        task = work_of.get((hit.session, hit.entity)) if hit.type == TASK_TYPE else None
        if hit.proposal is not None:
            placer.context.proposal(hit, hit.proposal)
        elif task is not None:
            placer.work(task)
        elif _is_fact(hit):
            placer.fact(hit)
        # else: reached only through an inferred edge, or nothing asserted about it: not a fact

    fact_of_event = {cited.uri: hit for hit in result.hits if _is_fact(hit) for cited in hit.citations}
    proposal_of_event = {
        cited.uri: hit
        for hit in result.hits
        if hit.kind == "entity" and hit.proposal is not None
        for cited in hit.citations
    }
    for hit in result.hits:
        covering = [fact_of_event[c.uri] for c in hit.citations if c.uri in fact_of_event]
        proposing = [proposal_of_event[c.uri] for c in hit.citations if c.uri in proposal_of_event]
        if hit.kind == "entity":
            entity(hit)
        elif hit.proposal is not None and proposing and len(proposing) == len(hit.citations):
            for proposal in proposing:  # the event proposed them: they say it, with their review status
                entity(proposal)
        elif hit.proposal is not None:  # a derived event's own words: a proposal, not a verbatim fact
            placer.context.proposal(hit, hit.proposal)
        elif hit.kind == "event" and covering and len(covering) == len(hit.citations):
            for fact in covering:  # the event asserted facts: they say it, current, in fewer words
                entity(fact)
        else:
            placer.snippet(hit)
    for invalidation in result.invalidated:
        placer.no_longer_true(invalidation)
    for hit in result.hits:
        if hit.inferred is not None:
            placer.context.link(hit, hit.inferred)
    return placer.placed


class _Placer:
    """Adds items to the sections of a checkout's prompt, each once, and keeps what made it in."""

    def __init__(self, builder: PromptBuilder, request: CheckoutRequest) -> None:
        self.builder = builder
        self.placed = _Placed()
        self._facts = builder.section(f"## Facts (authoritative, as of {request.as_of or 'now'})")
        self._gone = builder.section("## No longer true (invalidated: do not state these as current)")
        self._work = builder.section("## Work state (tasks: status, owner, blockers)")
        self._snippets = builder.section("## Verbatim snippets")
        self.context = ContextPlacer(
            builder,
            "## Proposed, inferred and causal (NOT authoritative: proposals and links awaiting review)",
        )
        self.placed.inferred, self.placed.tally = self.context.items, self.context.tally
        self._seen: set[str] = set()

    def fact(self, hit: Hit) -> None:
        if self._again(hit.key):
            return
        line = f"- {hit.entity} ({hit.type}): {flat(hit.summary)} ({_window(hit)}) "
        numbers = self.builder.try_add(self._facts, line.__add__, hit.citations)
        if numbers is not None:
            self.placed.facts.append(_fact(hit, numbers))
            self.placed.hits.append(hit)

    def snippet(self, hit: Hit) -> None:
        text = flat(hit.summary)
        numbers = self.builder.try_add(self._snippets, _snippet_line(hit, text), hit.citations)
        if numbers is not None:
            self.placed.snippets.append(_snippet(hit, text, numbers))
            self.placed.hits.append(hit)

    def no_longer_true(self, invalidation: Invalidation) -> None:
        text, gone = flat(invalidation.statement), invalidation
        line = f"- {gone.entity} ({gone.type}) stopped holding at {gone.invalid_at}: {text} "
        numbers = self.builder.try_add(self._gone, line.__add__, [invalidation.citation])
        if numbers is not None:
            self.placed.no_longer_true.append(_no_longer_true(invalidation, text, numbers))

    def work(self, task: TaskState) -> None:
        if self._again(f"task:{task.session}/{task.task}"):
            return
        state = f"claimed by {task.assignee}" if task.status == "claimed" and task.assignee else task.status
        blocked = f"; blocked by {', '.join(task.blocked_by)}" if task.blocked_by else ""
        line = f"- {task.task}: {flat(task.title)} [{state}{blocked}] (since {task.since}) "
        numbers = self.builder.try_add(self._work, line.__add__, [task.citation])
        if numbers is not None:
            self.placed.work.append(_work_item(task, numbers))

    def _again(self, key: str) -> bool:
        """Whether the item `key` was offered already (each is offered once, placed or not)."""
        seen = key in self._seen
        self._seen.add(key)
        return seen


def _work_item(task: TaskState, numbers: list[int]) -> WorkItem:
    return WorkItem(
        task=task.task,
        title=task.title,
        status=task.status,
        assignee=task.assignee,
        blocked_by=task.blocked_by,
        since=task.since,
        evidence=numbers,
    )


def _is_fact(hit: Hit) -> bool:
    """An entity found on its own with something asserted about it (a bare name is not a fact)."""
    return hit.kind == "entity" and not _only_inferred(hit) and bool(hit.summary.strip())


def _no_longer_true(invalidation: Invalidation, text: str, numbers: list[int]) -> NoLongerTrue:
    return NoLongerTrue(
        entity=invalidation.entity,
        type=invalidation.type,
        invalid_at=invalidation.invalid_at,
        statement=text,
        evidence=numbers,
    )


def _snippet_line(hit: Hit, text: str) -> Callable[[str], str]:
    about = f" {hit.entity} ({hit.type}, {hit.valid_from}): {text}"
    return lambda refs: f"- {refs}{about}"


def _already_cited(hit: Hit, uris: set[str]) -> bool:
    return all(cited.uri in uris for cited in hit.citations)


def _header(request: CheckoutRequest) -> list[str]:
    scope = f"session {request.session}" if request.session else "all sessions"
    header = ["# Memory checkout", f"Question: {clip(request.text, MAX_QUESTION_TOKENS)}", f"Scope: {scope}"]
    if request.as_of:
        header.append(f"As of: {request.as_of} (what was true then)")
    return header


def _fact(hit: Hit, numbers: list[int]) -> Fact:
    return Fact(
        entity=hit.entity,
        type=hit.type,
        summary=hit.summary,
        valid_from=hit.valid_from,
        valid_to=hit.valid_to,
        version=hit.version,
        score=hit.score,
        evidence=numbers,
    )


def _snippet(hit: Hit, text: str, numbers: list[int]) -> Snippet:
    return Snippet(
        title=hit.entity, type=hit.type, text=text, ts=hit.valid_from, score=hit.score, evidence=numbers
    )


def _guidance_lines(guidance: list[str]) -> list[str]:
    return ["", "## Guidance", *(f"- {line}" for line in guidance)]


def _guidance(
    request: CheckoutRequest, answerability: Answerability, shown: set[str], superseded: int, left_out: int
) -> list[str]:
    lines = [
        "Answer from the facts and snippets below and cite them as [n]; each [n] is an event of the log."
    ]
    when = f"as of {request.as_of}" if request.as_of else "now"
    lines.append(f"Facts hold {when}; {superseded} superseded or invalidated item(s) were left out.")
    if "gone" in shown:
        lines.append("What is under 'No longer true' stopped holding: never state it as current.")
    if "inferred" in shown:
        lines.append(
            "Inferred and causal context is NOT authoritative: present it as a possibility, with its trust."
        )
    if answerability.ask_user:
        lines.append("Memory has nothing on this: ask the user rather than guess.")
    elif not answerability.answer_from_memory:
        lines.append("The matches are weak: confirm with the user before relying on them.")
    if answerability.refresh_recommended:
        lines.append("Memory may be stale or incomplete here: re-check before acting.")
    if left_out:
        lines.append(f"{left_out} more item(s) did not fit the token budget; query memory for more.")
    return lines
