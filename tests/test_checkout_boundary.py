"""The checkout keeps the trust boundary: facts, then evidence, then proposals apart, with their status.

A consolidation candidate nobody reviewed (or one a reviewer rejected), and the ends of a causal edge, are
derived: they never appear among the facts. A promoted candidate is authoritative memory and does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eventloom.event import Event
from readmodels.checkout.assemble import assemble_context
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.query.local import LocalMemory
from tests.retrieval_support import story_models
from tests.test_graph_support import SessionLog, fact

pytestmark = pytest.mark.anyio


def source(event: Event) -> dict[str, object]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def candidate_story() -> tuple[SessionLog, Event]:
    log = SessionLog("c1")
    first = log.add(
        "memory.fact.asserted",
        fact(("billing-api", "service", "Bills customers monthly"), relations=[]),
    )
    log.add("transcript.turn", {"role": "user", "speaker": "Ann", "text": "billing-api invoices every month"})
    candidate = log.add(
        "consolidation.candidate.created",
        {
            "candidate_id": "cand-billing-weekly",
            "candidate_type": "claim",
            "title": "billing-api bills customers weekly",
            "summary": "billing-api bills customers weekly, replacing the monthly run",
            "source_events": [source(first)],
            "confidence": 0.6,
            "method": "test_fixture",
            "purpose": "one claim instead of two",
            "about": [{"name": "billing-api", "entity_type": "service"}],
        },
        actor="producer:consolidation",
    )
    return log, candidate


async def checkout(tmp_path: Path, events: list[Event], text: str) -> MemoryCheckout:
    async with (
        LadybugGraphStore(tmp_path / "graph.lbug") as graph,
        story_models(graph, tmp_path, events) as models,
    ):
        memory = LocalMemory(models.models, lambda: models.inferred)
        return await assemble_context(memory, CheckoutRequest(text=text, token_budget=3000))


async def test_a_pending_candidate_is_a_proposal_never_a_fact(tmp_path: Path) -> None:
    log, _ = candidate_story()
    bundle = await checkout(tmp_path, log.events, "how often does billing-api bill customers weekly")
    fact_names = {f.entity for f in bundle.facts}
    assert "cand-billing-weekly" not in fact_names
    assert all("weekly" not in f.summary for f in bundle.facts)
    proposed = [item for item in bundle.inferred if item.kind == "proposed"]
    assert [(p.about, p.status) for p in proposed] == [("cand-billing-weekly", "pending")]
    facts_at = bundle.prompt.index("## Facts")
    proposed_at = bundle.prompt.index("## Proposed, inferred and causal")
    assert facts_at < proposed_at
    assert "weekly" not in bundle.prompt[facts_at:proposed_at]
    assert "PROPOSED [pending]" in bundle.prompt[proposed_at:]


async def test_a_rejected_candidate_is_left_out_and_a_promoted_one_is_a_cited_fact(tmp_path: Path) -> None:
    log, candidate = candidate_story()
    review = log.add(
        "consolidation.candidate.reviewed",
        {
            "candidate_id": "cand-billing-weekly",
            "decision": "accepted",
            "reviewer": "alice",
            "rationale": "checked the billing schedule",
            "candidate_event": source(candidate),
        },
        actor="mcp:alice",
    )
    log.add(
        "consolidation.candidate.promoted",
        {
            "candidate_id": "cand-billing-weekly",
            "candidate_type": "claim",
            "title": "billing-api bills customers weekly",
            "summary": "billing-api bills customers weekly, replacing the monthly run",
            "source_events": [source(log.events[0])],
            "candidate_event": source(candidate),
            "review_event": source(review),
            "promoted_by": "alice",
            "about": [{"name": "billing-api", "entity_type": "service"}],
        },
        actor="mcp:alice",
    )
    bundle = await checkout(tmp_path, log.events, "how often does billing-api bill customers weekly")
    promoted = [f for f in bundle.facts if "weekly" in f.summary]
    assert promoted, bundle.prompt
    assert all(item.about != "cand-billing-weekly" or item.status != "pending" for item in bundle.inferred)

    rejected, candidate = candidate_story()
    rejected.add(
        "consolidation.candidate.reviewed",
        {
            "candidate_id": "cand-billing-weekly",
            "decision": "rejected",
            "reviewer": "alice",
            "rationale": "it is monthly",
            "candidate_event": source(candidate),
        },
    )
    bundle = await checkout(tmp_path / "rejected", rejected.events, "does billing-api bill weekly")
    assert all("weekly" not in f.summary for f in bundle.facts)
    assert not [item for item in bundle.inferred if item.about == "cand-billing-weekly"]
