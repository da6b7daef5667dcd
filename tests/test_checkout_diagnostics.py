"""Checkout diagnostics, on constructed hits: what the inferred and causal links and the consolidation
candidates a question reached were, how trusted, what was left out and why, the low-trust guidance, and the
prompt section that says so within the budget (never instead of a fact). The confidence a causal edge's
proposal shows is the edge's own (it showed 0.00 for an edge of 0.80)."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from readmodels.checkout.assemble import checkout_from
from readmodels.checkout.budget import estimate_tokens
from readmodels.checkout.context_report import TRUST_FLOOR
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.retrieval.model import Hit, InferredLink, Proposal
from tests.test_checkout import hit, result_of

HYPOTHESES = "treat them as hypotheses; verify before acting"


def link(
    source: str, relation: str, target: str, *, trust: float, seq: int, **fields: object
) -> InferredLink:
    values: dict[str, object] = {
        "kind": "inferred",
        "confidence": 0.6,
        "method": "co_mention_v1",
        "citation": f"eventloom://s/events/{seq}#{seq:012x}",
    }
    values.update(fields)
    return msgspec.convert(
        {"source": source, "relation_type": relation, "target": target, "trust": trust, **values},
        InferredLink,
    )


def reached(entity: str, via: InferredLink, seq: int) -> Hit:
    return hit(entity, f"{entity} as asserted", lanes=("traversal",), seqs=(seq,), inferred=via)


def proposed(key: str, proposal: Proposal, *, kind: str = "entity", entity_type: str = "service") -> Hit:
    found = hit(key, f"{key} proposed", kind=kind, seqs=(sum(map(ord, key)),))
    return msgspec.structs.replace(found, type=entity_type, proposal=proposal)


def candidate(key: str, candidate_type: str, status: str = "pending") -> Hit:
    proposal = Proposal(
        status=status,
        source_event_type="consolidation.candidate.created",
        confidence=0.6,
        candidate_type=candidate_type,
    )
    return proposed(key, proposal, entity_type="consolidation_candidate")


def section(checkout: MemoryCheckout, title: str) -> str:
    start = checkout.prompt.index(title)
    end = checkout.prompt.find("\n## ", start + 1)
    return checkout.prompt[start : end if end >= 0 else None]


def test_inferred_links_are_counted_by_relation_and_method_and_a_weak_one_is_named() -> None:
    weak = link("billing", "depends_on", "auth", trust=0.25, seq=8)
    strong = link("billing", "uses", "postgres", trust=0.9, seq=9, confidence=0.95, method="citation_v1")
    floor = link("x", "depends_on", "y", trust=TRUST_FLOOR / 2, seq=10)
    hits = [hit("billing", "Charges invoices", seqs=(1,))]
    hits += [reached("auth", weak, 2), reached("postgres", strong, 3), reached("y", floor, 4)]
    checkout = checkout_from(result_of(*hits), CheckoutRequest(text="what does billing depend on?"))

    report = checkout.inferred_context
    assert (report.considered, report.shown) == (3, 2)
    assert report.by_relation == {"depends_on": 2, "uses": 1}
    assert report.by_method == {"citation_v1": 1, "co_mention_v1": 2}
    assert (report.average_trust, report.lowest_trust) == (0.575, 0.25)
    assert (report.average_confidence, report.lowest_confidence) == (0.775, 0.6)
    assert report.weakest == "billing -depends_on-> auth"
    assert report.left_out == {"below_trust_floor": 1}
    assert report.guidance is not None and HYPOTHESES in report.guidance and report.weakest in report.guidance
    assert report.guidance in checkout.guidance and f"- {report.guidance}" in checkout.prompt
    assert checkout.causal_context.considered == 0 and checkout.causal_context.guidance is None
    assert checkout.consolidation.pending == 0
    assert checkout.diagnostics.inferred_context == 2  # the count of shown items, as before
    assert "x -depends_on-> y" not in checkout.prompt
    diagnostics = section(checkout, "## Context diagnostics")
    assert "Inferred links: 3 considered (relations: depends_on 2, uses 1;" in diagnostics
    assert "trust average 0.57, lowest 0.25" in diagnostics and "left out: below_trust_floor 1" in diagnostics
    assert "Causal links" not in diagnostics and "Consolidation" not in diagnostics
    assert checkout.prompt.index("## Context diagnostics") < checkout.prompt.index("## Evidence")


def test_trusted_links_get_no_low_trust_guidance() -> None:
    sure = link("billing", "uses", "postgres", trust=0.9, seq=9, confidence=0.95)
    checkout = checkout_from(result_of(reached("postgres", sure, 3)), CheckoutRequest(text="billing"))
    assert checkout.inferred_context.shown == 1 and checkout.inferred_context.guidance is None
    assert not any(HYPOTHESES in line for line in checkout.guidance)


def test_a_causal_edge_proposal_shows_the_edge_confidence_and_is_counted_once() -> None:
    """Regression: the proposal line of a causal edge of confidence 0.80 said "confidence 0.00"."""
    edge = link(
        "skip-migrations", "causal_caused", "login outage", trust=0.48, seq=4,
        kind="causal", confidence=0.8, method="incident_review",
    )  # fmt: skip
    event = Proposal(status="proposed", source_event_type="causal.edge.generated", confidence=0.8, edge=edge)
    edge_event = proposed("event:s/4", event, kind="event", entity_type="causal.edge.generated")
    via_edge = reached("login outage", edge, 5)  # the same edge, reached by traversal too
    checkout = checkout_from(result_of(edge_event, via_edge), CheckoutRequest(text="why the login outage?"))

    line = next(line for line in checkout.prompt.splitlines() if line.startswith("- PROPOSED"))
    assert line.startswith("- PROPOSED [proposed] skip-migrations -causal_caused-> login outage (causal,")
    assert "confidence 0.80, trust 0.48, method incident_review" in line
    assert "confidence 0.00" not in checkout.prompt
    (item,) = checkout.inferred
    assert (item.kind, item.confidence, item.trust, item.about) == ("proposed", 0.8, 0.48, "login outage")
    report = checkout.causal_context
    assert (report.considered, report.shown, report.by_relation) == (1, 1, {"causal_caused": 1})
    assert (report.average_confidence, report.lowest_trust) == (0.8, 0.48)
    assert report.guidance is not None and "Low-trust causal links" in report.guidance
    assert "Causal links: 1 considered" in section(checkout, "## Context diagnostics")
    assert checkout.inferred_context.considered == 0


def test_an_edge_that_no_longer_holds_is_left_out_as_stale_and_provenance_is_counted() -> None:
    uncited = link("a", "related_to", "b", trust=0.3, seq=11, cited_source=False)
    cited = link("a", "related_to", "c", trust=0.7, seq=12, cited_source=True)
    retracted = link("a", "related_to", "d", trust=0.7, seq=13, cited_source=True)
    closed = Proposal(status="closed", source_event_type="inference.edge.generated", edge=retracted)
    hits = [reached("b", uncited, 1), reached("c", cited, 2), proposed("event:s/13", closed, kind="event")]
    checkout = checkout_from(result_of(*hits), CheckoutRequest(text="what relates to a?"))
    report = checkout.inferred_context
    assert (report.considered, report.shown, report.missing_provenance) == (3, 2, 1)
    assert report.left_out == {"no_longer_holds": 1}
    assert "a -related_to-> d" not in checkout.prompt
    line = section(checkout, "## Context diagnostics")
    assert "left out: no_longer_holds 1; 1 without provenance" in line


def test_a_proposal_without_a_confidence_does_not_claim_one() -> None:
    bare = Proposal(status="proposed", source_event_type="inference.edge.contradicted")
    checkout = checkout_from(result_of(proposed("event:s/7", bare, kind="event")), CheckoutRequest(text="q"))
    assert "confidence not given" in checkout.prompt and "confidence 0.00" not in checkout.prompt


def test_consolidation_candidates_are_counted_by_type_and_never_facts() -> None:
    hits = [
        candidate("cand-weekly", "claim"),
        candidate("cand-runbook", "procedure"),
        candidate("cand-old", "claim", status="rejected"),
        candidate("cand-done", "claim", status="promoted"),
    ]
    checkout = checkout_from(result_of(*hits), CheckoutRequest(text="billing schedule"))
    report = checkout.consolidation
    assert (report.pending, report.shown, report.by_type) == (2, 2, {"claim": 1, "procedure": 1})
    assert report.left_out == {"promoted": 1, "rejected_or_retracted": 1}
    assert "never facts" in report.note
    assert checkout.facts == []
    assert {item.about for item in checkout.inferred} == {"cand-weekly", "cand-runbook"}
    line = section(checkout, "## Context diagnostics")
    assert "Consolidation candidates: 2 pending (claim 1, procedure 1), 2 shown as PROPOSED" in line
    assert "left out: promoted 1, rejected_or_retracted 1; pending candidates are never facts" in line


def test_a_tight_budget_keeps_the_facts_and_counts_the_links_it_had_no_room_for() -> None:
    facts = [hit(f"service-{i}", f"service {i} " + "details " * 20, seqs=(10 + i,)) for i in range(3)]
    links = [
        reached(f"n{i}", link("a", "related_to", f"n{i}", trust=0.3, seq=50 + i), 30 + i) for i in range(8)
    ]
    checkout = checkout_from(result_of(*facts, *links), CheckoutRequest(text="services", token_budget=420))
    assert estimate_tokens(checkout.prompt) <= 420
    alone = checkout_from(result_of(*facts), CheckoutRequest(text="services", token_budget=420))
    assert [f.entity for f in checkout.facts] == [f.entity for f in alone.facts]
    report = checkout.inferred_context
    assert (
        report.considered == 8 and report.shown < 8 and report.left_out == {"token_budget": 8 - report.shown}
    )
    if report.shown:  # a shown low-trust link always has its guidance: it was reserved with it
        assert report.guidance is not None and report.guidance in checkout.prompt


@settings(max_examples=60, deadline=None)
@given(
    budget=st.integers(min_value=200, max_value=2500),
    summaries=st.lists(st.text(min_size=1, max_size=600), min_size=0, max_size=8),
    trusts=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=0, max_size=12),
    names=st.lists(st.text(min_size=1, max_size=200), min_size=12, max_size=12),
)
def test_links_never_crowd_out_facts_nor_the_budget(
    budget: int, summaries: list[str], trusts: list[float], names: list[str]
) -> None:
    facts = [hit(f"f{i}", text, seqs=(i + 1,)) for i, text in enumerate(summaries)]
    links = [
        reached(f"n{i}", link(names[i], "related_to", f"n{i}", trust=trust, seq=500 + i), 100 + i)
        for i, trust in enumerate(trusts)
    ]
    request = CheckoutRequest(text="q", token_budget=budget)
    checkout = checkout_from(result_of(*facts, *links), request)
    alone = checkout_from(result_of(*facts), request)
    assert estimate_tokens(checkout.prompt) <= budget
    assert checkout.diagnostics.tokens == estimate_tokens(checkout.prompt)
    assert [f.entity for f in checkout.facts] == [f.entity for f in alone.facts]
    report = checkout.inferred_context
    assert report.considered == len(trusts)
    assert report.shown + sum(report.left_out.values()) == report.considered
    assert report.guidance is None or report.guidance in checkout.prompt
