"""An edge event's proposal carries the edge it created, on LadybugDB and Neo4j: the edge's own confidence
and method (a causal edge of 0.80 showed 0.00 in a checkout), and status `closed` once the edge no longer
holds (retracted), though it held before."""

from __future__ import annotations

import msgspec
import pytest

from readmodels.graph.protocol import GraphStore
from readmodels.retrieval.edge_proposals import with_proposed_edges
from readmodels.retrieval.model import Hit, Proposal
from tests import test_graph_support as support
from tests.test_checkout import hit
from tests.test_graph_support import SessionLog, project, ts

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store


def edge_event_hit(seq: int, event_type: str) -> Hit:
    found = hit(f"event:s/{seq}", "what the edge event said", kind="event", seqs=(seq,))
    return msgspec.structs.replace(found, proposal=Proposal(status="proposed", source_event_type=event_type))


def story() -> SessionLog:
    log = SessionLog("s")
    decision = log.add("decision.made", {"decision_id": "skip-migrations", "title": "Skip migrations"})
    log.add(
        "causal.edge.generated",
        {
            "cause": "skip-migrations",
            "effect": "login outage",
            "taxonomy": "caused",
            "relation_type": "causal_caused",
            "confidence": 0.8,
            "method": "incident_review",
            "evidence": [{"event_seq": decision.seq, "event_hash": decision.hash}],
        },
    )
    edge = {"source": "billing", "target": "auth", "relation_type": "depends_on", "confidence": 0.6}
    log.add("inference.edge.generated", {**edge, "method": "co_mention_v1", "edge_id": "e-1"})
    log.add("inference.edge.retracted", {"edge_id": "e-1", "reason": "billing does not call auth"})
    return log


async def test_an_edge_event_proposal_gets_its_edge_and_is_closed_once_retracted(
    graph_store: GraphStore,
) -> None:
    await project(graph_store, story().events)
    causal, inferred = (
        edge_event_hit(2, "causal.edge.generated"),
        edge_event_hit(3, "inference.edge.generated"),
    )
    plain = hit("auth", "Issues tokens", seqs=(1,))
    now = await with_proposed_edges(graph_store, None, [causal, inferred, plain])
    assert now[2] == plain
    [made, retracted] = [found.proposal for found in now[:2]]
    assert made is not None and made.edge is not None
    assert (made.confidence, made.edge.confidence, made.edge.kind) == (0.8, 0.8, "causal")
    assert (made.edge.method, made.edge.relation_type, made.status) == (
        "incident_review",
        "causal_caused",
        "proposed",
    )
    assert made.edge.cited_source is False and 0 < made.edge.trust < 0.8  # the edge's own formula
    assert retracted is not None and retracted.edge is not None
    assert (retracted.status, retracted.edge.confidence) == ("closed", 0.6)
    before = await with_proposed_edges(graph_store, None, [inferred], as_of=ts(3.5))
    assert before[0].proposal is not None and before[0].proposal.status == "proposed"
