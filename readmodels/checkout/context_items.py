"""The non-authoritative items of a checkout's prompt: proposals (consolidation candidates, what an
inferred or causal edge asserted, agents' claims) and the inferred or causal links hits were reached
through. Each goes into the one section, with its status, confidence and trust, and is tallied
(`ContextTally`) whether it made it in or not."""

from __future__ import annotations

from typing import Final

from readmodels.checkout.budget import MAX_ITEM_TOKENS, clip, estimate_tokens
from readmodels.checkout.context_report import (
    LONGEST_LOW_TRUST_LINE,
    TRUST_FLOOR,
    CandidateOffer,
    ContextTally,
    EdgeOffer,
    Outcome,
)
from readmodels.checkout.model import InferredContext
from readmodels.checkout.prompt import PromptBuilder
from readmodels.retrieval.model import Citation, Hit, InferredLink, Proposal

HIDDEN_PROPOSALS: Final[dict[str, Outcome]] = {
    "rejected": "rejected_or_retracted",
    "retracted": "rejected_or_retracted",
    "promoted": "promoted",
    "closed": "no_longer_holds",
}
"""Statuses after which a proposal is left out of a checkout, and why (a promoted one answers as its
memory; a `closed` one is an edge that no longer held, `readmodels.retrieval.edge_proposals`)."""
CANDIDATE_ENTITY_TYPE: Final = "consolidation_candidate"
CANDIDATE_EVENT_PREFIX: Final = "consolidation.candidate."
GUIDANCE_LINE_TOKENS: Final = estimate_tokens(f"- {LONGEST_LOW_TRUST_LINE}") + 2
"""The most one low-trust guidance line adds to a prompt (its text, its newline, rounding)."""


def flat(text: str) -> str:
    return clip(" ".join(text.split()), MAX_ITEM_TOKENS)


def link_citation(link: InferredLink) -> Citation:
    session, rest = link.citation.removeprefix("eventloom://").split("/events/", 1)
    seq, short_hash = rest.split("#", 1)
    return Citation(uri=link.citation, session=session, seq=int(seq), hash=short_hash)


def edge_statement(link: InferredLink) -> str:
    return f"{link.source} -{link.relation_type}-> {link.target}"


def _is_candidate(hit: Hit, proposal: Proposal) -> bool:
    return hit.type == CANDIDATE_ENTITY_TYPE or proposal.source_event_type.startswith(CANDIDATE_EVENT_PREFIX)


class ContextPlacer:
    """Places proposals and inferred links into `section` of `builder`, each once, and tallies them."""

    def __init__(self, builder: PromptBuilder, section_title: str) -> None:
        self.builder = builder
        self.section = builder.section(section_title)
        self.items: list[InferredContext] = []
        self.tally = ContextTally()
        self._seen: set[str] = set()
        self._guidance_paid: set[str] = set()
        """The kinds of edge whose low-trust guidance is reserved: the first shown edge of a kind pays it."""

    def _again(self, key: str) -> bool:
        seen = key in self._seen
        self._seen.add(key)
        return seen

    def _again_edge(self, link: InferredLink) -> bool:
        return self._again(f"edge:{link.citation}:{edge_statement(link)}")

    def link(self, hit: Hit, link: InferredLink) -> None:
        """The inferred or causal edge `hit` was reached through (each edge once)."""
        if self._again_edge(link):
            return
        outcome: Outcome = "below_trust_floor"
        if link.trust >= TRUST_FLOOR:
            outcome = self._add_link(hit.entity, link, "")
        self.tally.edge(_edge_offer(link, outcome))

    def proposal(self, hit: Hit, proposal: Proposal) -> None:
        """A proposal with its status; a rejected, retracted or promoted one is counted, never shown."""
        if self._again(hit.key):
            return
        hidden = proposal.status in HIDDEN_PROPOSALS
        if proposal.edge is not None:
            if not self._again_edge(proposal.edge):
                self._edge_proposal(hit, proposal, proposal.edge, hidden)
            return
        outcome = HIDDEN_PROPOSALS[proposal.status] if hidden else self._add_proposal(hit, proposal)
        if _is_candidate(hit, proposal):
            kind = proposal.candidate_type or "unknown"
            self.tally.candidate(CandidateOffer(candidate_type=kind, status=proposal.status, outcome=outcome))

    def _edge_proposal(self, hit: Hit, proposal: Proposal, link: InferredLink, hidden: bool) -> None:
        outcome: Outcome = HIDDEN_PROPOSALS[proposal.status] if hidden else "below_trust_floor"
        if not hidden and link.trust >= TRUST_FLOOR:
            about = hit.entity if hit.kind == "entity" else link.target  # an event: what its edge is about
            outcome = self._add_link(about, link, f"PROPOSED [{proposal.status}] ", proposal.status)
        self.tally.edge(_edge_offer(link, outcome))

    def _add_link(self, about: str, link: InferredLink, prefix: str, status: str | None = None) -> Outcome:
        statement = edge_statement(link)
        line = (
            f"- {prefix}{statement} ({link.kind}, confidence {link.confidence:.2f}, trust {link.trust:.2f}, "
            f"method {link.method}) "
        )
        numbers = self._try_add_paying_guidance(link.kind, line, link_citation(link))
        if numbers is None:
            return "token_budget"
        self.items.append(
            InferredContext(
                statement=statement,
                kind="proposed" if status is not None else link.kind,
                about=about,
                confidence=link.confidence,
                trust=link.trust,
                method=link.method,
                evidence=numbers,
                status=status or "proposed",
            )
        )
        return "shown"

    def _try_add_paying_guidance(self, kind: str, line: str, cited: Citation) -> list[int] | None:
        """Add an edge's line only if the low-trust guidance for its kind fits too (reserved until the
        guidance is written), so that guidance never needs room an item took."""
        extra = 0 if kind in self._guidance_paid else GUIDANCE_LINE_TOKENS
        self.builder.reserve += extra
        numbers = self.builder.try_add(self.section, line.__add__, [cited])
        if numbers is None:
            self.builder.reserve -= extra
        else:
            self._guidance_paid.add(kind)
        return numbers

    def _add_proposal(self, hit: Hit, proposal: Proposal) -> Outcome:
        known = proposal.confidence is not None
        confidence = proposal.confidence if proposal.confidence is not None else 0.0
        shown_confidence = f"confidence {confidence:.2f}" if known else "confidence not given"
        statement = f"{hit.entity} ({hit.type}): {flat(hit.summary)}"
        source = proposal.source_event_type
        line = f"- PROPOSED [{proposal.status}] {statement} ({shown_confidence}, from {source}) "
        if proposal.claimed_by is not None:  # an agent's conclusion: who says so, how sure
            line = f"- CLAIMED by {proposal.claimed_by} ({shown_confidence}) [{proposal.status}] {statement} "
        numbers = self.builder.try_add(self.section, line.__add__, hit.citations)
        if numbers is None:
            return "token_budget"
        self.items.append(
            InferredContext(
                statement=statement,
                kind="proposed",
                about=hit.entity,
                confidence=confidence,
                trust=confidence,
                method=proposal.method or proposal.source_event_type,
                evidence=numbers,
                status=proposal.status,
            )
        )
        return "shown"


def _edge_offer(link: InferredLink, outcome: Outcome) -> EdgeOffer:
    return EdgeOffer(
        kind=link.kind,
        statement=edge_statement(link),
        relation=link.relation_type,
        method=link.method,
        confidence=link.confidence,
        trust=link.trust,
        outcome=outcome,
        cited_source=link.cited_source,
    )
