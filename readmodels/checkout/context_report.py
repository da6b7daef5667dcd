"""What a checkout says about its non-authoritative context: the inferred and causal edges and the
consolidation candidates the question reached, shown or left out (and why), how trusted, and guidance when
that trust is low.

`ContextTally` records each item as it is offered to the prompt; `edge_context` and
`consolidation_context` turn the records into the checkout's `inferred_context`, `causal_context` and
`consolidation`, and `diagnostic_lines` into the compact prompt section that describes them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final, Literal

import msgspec

from readmodels.checkout.budget import clip
from readmodels.checkout.model import ConsolidationContext, EdgeContext, LeftOutReason

TRUST_FLOOR: Final = 0.1
"""An inferred or causal link trusted less than this is left out of the prompt (counted, never shown)."""
LOW_AVERAGE_TRUST: Final = 0.6
LOW_LOWEST_TRUST: Final = 0.4
"""Guidance warns when the shown links' average trust, or the weakest one's, is under these."""
WEAKEST_TOKENS: Final = 30
"""How much of the weakest link's statement the guidance quotes."""
UNKNOWN_TYPE: Final = "unknown"

EdgeKind = Literal["inferred", "causal"]
Outcome = Literal["shown"] | LeftOutReason


@dataclass(frozen=True)
class EdgeOffer:
    """An inferred or causal edge offered to the prompt, and what became of it."""

    kind: EdgeKind
    statement: str
    relation: str
    method: str
    confidence: float
    trust: float
    outcome: Outcome
    cited_source: bool | None = None


@dataclass(frozen=True)
class CandidateOffer:
    """A consolidation candidate offered to the prompt, and what became of it."""

    candidate_type: str
    status: str
    outcome: Outcome


@dataclass
class ContextTally:
    edges: list[EdgeOffer] = field(default_factory=list)
    candidates: list[CandidateOffer] = field(default_factory=list)

    def edge(self, offer: EdgeOffer) -> None:
        self.edges.append(offer)

    def candidate(self, offer: CandidateOffer) -> None:
        self.candidates.append(offer)

    def of_kind(self, kind: EdgeKind) -> list[EdgeOffer]:
        return [offer for offer in self.edges if offer.kind == kind]


def _average(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _left_out(outcomes: list[Outcome]) -> dict[str, int]:
    return dict(sorted(Counter(outcome for outcome in outcomes if outcome != "shown").items()))


def edge_context(kind: EdgeKind, offers: list[EdgeOffer]) -> EdgeContext:
    shown = [offer for offer in offers if offer.outcome == "shown"]
    weakest = min(shown, key=lambda offer: (offer.trust, offer.statement), default=None)
    context = EdgeContext(
        considered=len(offers),
        shown=len(shown),
        by_relation=dict(sorted(Counter(offer.relation for offer in offers).items())),
        by_method=dict(sorted(Counter(offer.method for offer in offers).items())),
        average_confidence=_average([offer.confidence for offer in shown]),
        lowest_confidence=min((offer.confidence for offer in shown), default=None),
        average_trust=_average([offer.trust for offer in shown]),
        lowest_trust=weakest.trust if weakest else None,
        weakest=weakest.statement if weakest else None,
        left_out=_left_out([offer.outcome for offer in offers]),
        missing_provenance=sum(1 for offer in offers if offer.cited_source is False),
    )
    return msgspec.structs.replace(context, guidance=low_trust_guidance(kind, context))


def low_trust_guidance(kind: EdgeKind, context: EdgeContext) -> str | None:
    """ "Treat as hypotheses", naming the weakest edge, when the shown edges' trust is low; else None."""
    average, lowest = context.average_trust, context.lowest_trust
    if average is None or lowest is None or context.weakest is None:
        return None
    if average >= LOW_AVERAGE_TRUST and lowest >= LOW_LOWEST_TRUST:
        return None
    return low_trust_line(kind, average, lowest, clip(" ".join(context.weakest.split()), WEAKEST_TOKENS))


def low_trust_line(kind: EdgeKind, average: float, lowest: float, weakest: str) -> str:
    return (
        f"Low-trust {kind} links (trust average {average:.2f}, lowest {lowest:.2f}: {weakest}): "
        "treat them as hypotheses; verify before acting."
    )


LONGEST_LOW_TRUST_LINE: Final = low_trust_line("inferred", 0.0, 0.0, "x" * (WEAKEST_TOKENS * 3))
"""What the budget reserves for the low-trust guidance of one kind of edge (its statement is clipped)."""


def consolidation_context(offers: list[CandidateOffer]) -> ConsolidationContext:
    pending = [offer for offer in offers if offer.outcome in ("shown", "token_budget", "below_trust_floor")]
    return ConsolidationContext(
        pending=len(pending),
        by_type=dict(sorted(Counter(offer.candidate_type for offer in pending).items())),
        shown=sum(1 for offer in pending if offer.outcome == "shown"),
        left_out=_left_out([offer.outcome for offer in offers]),
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items())


def _edge_line(label: str, context: EdgeContext) -> str | None:
    if not context.considered:
        return None
    line = (
        f"- {label}: {context.considered} considered (relations: {_counts(context.by_relation)}; "
        f"methods: {_counts(context.by_method)}), {context.shown} shown"
    )
    if context.average_trust is not None and context.average_confidence is not None:
        line += (
            f"; trust average {context.average_trust:.2f}, lowest {context.lowest_trust:.2f}; "
            f"confidence average {context.average_confidence:.2f}, lowest {context.lowest_confidence:.2f}"
        )
    if context.left_out:
        line += f"; left out: {_counts(context.left_out)}"
    if context.missing_provenance:
        line += f"; {context.missing_provenance} without provenance"
    return line


def _consolidation_line(context: ConsolidationContext) -> str | None:
    if not context.pending and not context.left_out:
        return None
    line = f"- Consolidation candidates: {context.pending} pending"
    if context.by_type:
        line += f" ({_counts(context.by_type)})"
    line += f", {context.shown} shown as PROPOSED"
    if context.left_out:
        line += f"; left out: {_counts(context.left_out)}"
    return line + "; pending candidates are never facts"


def diagnostic_lines(
    inferred: EdgeContext, causal: EdgeContext, consolidation: ConsolidationContext
) -> list[str]:
    """The compact prompt lines for the three reports, for those with anything to say."""
    lines = [
        _edge_line("Inferred links", inferred),
        _edge_line("Causal links", causal),
        _consolidation_line(consolidation),
    ]
    return [line for line in lines if line is not None]
