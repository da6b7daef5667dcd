"""Checkout diagnostics through a real node: events appended to the log, projected by the graph, keyword,
vector and inferred projectors, and a checkout asked of the query service over NATS. The causal edge the
log proposed with confidence 0.80 shows 0.80 (it showed 0.00), and the JSON and the prompt say what
inferred, causal and consolidation context the question reached."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import msgspec
import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node import Node
from readmodels.checkout.model import CheckoutRequest
from readmodels.query.client import MemoryClient
from readmodels.query.service import SUBJECT_PREFIX, Reply
from tests.test_graph_support import fact
from tests.test_query_service import projected, start_node

pytestmark = pytest.mark.anyio

SESSION = "diag"
QUESTION = "why did the login outage follow skip-migrations, and does billing-service depend on auth-service?"


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[Node]:
    async for running in start_node(replace(settings, producers="none")):
        yield running


def cites(event: Event) -> dict[str, object]:
    return {"event_seq": event.seq, "event_hash": event.hash}


def source(event: Event) -> dict[str, object]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


async def tell(log: EventLog) -> None:
    """A decision, the outage it caused (a causal edge of confidence 0.80, cited), an uncited inferred
    edge (low trust), an inferred edge retracted since, and a pending consolidation candidate."""

    async def add(event_type: str, payload: dict[str, Any]) -> Event:
        return await log.append(SESSION, event_type, "agent:diag", payload)

    services = fact(
        ("auth-service", "service", "Issues and refreshes login tokens"),
        ("billing-service", "service", "Charges invoices"),
        relations=[],
    )
    asserted = await add("memory.fact.asserted", services)
    decision = await add(
        "decision.made", {"decision_id": "skip-migrations", "title": "Deploy without running migrations"}
    )
    outage = await add(
        "outcome.explained",
        {
            "outcome": "login outage",
            "explanation": "the login outage followed from skip-migrations",
            "taxonomy": "caused",
            "cause": "skip-migrations",
            "cause_event_seq": decision.seq,
            "cause_event_hash": decision.hash,
        },
    )
    await add(
        "causal.edge.generated",
        {
            "cause": "skip-migrations",
            "effect": "login outage",
            "taxonomy": "caused",
            "relation_type": "causal_caused",
            "confidence": 0.8,
            "method": "incident_review",
            "evidence": [cites(outage)],
            "cause_entity": {"name": "skip-migrations", "entity_type": "decision"},
            "effect_entity": {"name": "login outage", "entity_type": "outcome"},
        },
    )
    await add(
        "inference.edge.generated",
        {
            "source": "billing-service",
            "target": "auth-service",
            "relation_type": "depends_on",
            "confidence": 0.6,
            "method": "co_mention_v1",
            "edge_id": "e-billing-auth",
        },
    )
    await add(
        "inference.edge.generated",
        {
            "source": "billing-service",
            "target": "login outage",
            "relation_type": "caused_by",
            "confidence": 0.9,
            "method": "co_mention_v1",
            "edge_id": "e-billing-outage",
        },
    )
    await add(
        "inference.edge.retracted", {"edge_id": "e-billing-outage", "reason": "billing was not involved"}
    )
    await add(
        "consolidation.candidate.created",
        {
            "candidate_id": "cand-login-migrations",
            "candidate_type": "claim",
            "title": "login outage follows skip-migrations",
            "summary": "skip-migrations caused the login outage of auth-service",
            "source_events": [source(asserted), source(outage)],
            "confidence": 0.7,
            "method": "test_fixture",
            "purpose": "one claim about the outage",
            "about": [{"name": "auth-service", "entity_type": "service"}],
        },
    )


async def test_the_checkout_reports_its_context_and_shows_each_edge_confidence(
    node: Node, log: EventLog
) -> None:
    await tell(log)
    await projected(log)
    request = CheckoutRequest(text=QUESTION, session=SESSION, token_budget=3000)
    checkout = await MemoryClient(log.client).checkout(request)
    prompt = checkout.prompt

    causal_line = next(
        line for line in prompt.splitlines() if "-causal_caused->" in line and "- PROP" in line
    )
    assert "skip-migrations -causal_caused-> login outage (causal, confidence 0.80" in causal_line, prompt
    assert "method incident_review" in causal_line
    assert "confidence 0.00" not in prompt
    causal = checkout.causal_context
    assert causal.by_relation == {"causal_caused": 1} and causal.by_method == {"incident_review": 1}
    assert (causal.shown, causal.average_confidence, causal.lowest_confidence) == (1, 0.8, 0.8)
    assert causal.lowest_trust is not None and 0 < causal.lowest_trust < 0.8  # unknown method: discounted
    assert causal.missing_provenance == 1  # appended directly: it names no event it was derived from

    inferred = checkout.inferred_context
    assert inferred.by_relation == {"caused_by": 1, "depends_on": 1} and inferred.by_method == {
        "co_mention_v1": 2
    }
    assert inferred.left_out == {"no_longer_holds": 1}  # the retracted edge: its event was found, not shown
    assert "billing-service -caused_by-> login outage" not in prompt and inferred.missing_provenance == 2
    assert inferred.shown == 1 and inferred.weakest == "billing-service -depends_on-> auth-service"
    assert inferred.lowest_trust is not None and inferred.lowest_trust < 0.4  # no provenance, no evidence
    assert inferred.guidance is not None and "verify before acting" in inferred.guidance
    assert inferred.guidance in checkout.guidance and inferred.guidance in prompt

    consolidation = checkout.consolidation
    assert (consolidation.pending, consolidation.shown, consolidation.by_type) == (1, 1, {"claim": 1})
    assert "cand-login-migrations" not in {f.entity for f in checkout.facts}

    diagnostics = prompt[prompt.index("## Context diagnostics") : prompt.index("## Evidence")]
    assert (
        "Causal links: 1 considered (relations: causal_caused 1; methods: incident_review 1)" in diagnostics
    )
    assert (
        "Inferred links: 2 considered (relations: caused_by 1, depends_on 1; methods: co_mention_v1 2)"
        in (diagnostics)
    )
    assert "left out: no_longer_holds 1; 2 without provenance" in diagnostics
    assert "Consolidation candidates: 1 pending (claim 1), 1 shown as PROPOSED" in diagnostics
    assert checkout.diagnostics.tokens <= 3000

    raw = await log.client.request(SUBJECT_PREFIX + "checkout", msgspec.json.encode(request), timeout=30)
    reply = msgspec.json.decode(raw.data, type=Reply)
    assert reply.error is None and isinstance(reply.result, dict)
    assert reply.result["causal_context"]["by_relation"] == {"causal_caused": 1}
    assert reply.result["inferred_context"]["weakest"] == "billing-service -depends_on-> auth-service"
    assert reply.result["consolidation"]["note"].endswith("never facts")
    assert isinstance(reply.result["diagnostics"]["inferred_context"], int)  # unchanged: a count
