"""Reads follow accepted `same_as` links only, on LadybugDB and Neo4j: two spellings of one service, each
with its own fact and edge; the producer's proposal is not followed, a reviewer's acceptance (the same edge
asserted again, `accepted`) makes one entity of them, and a retraction splits them again."""

from __future__ import annotations

from typing import Any

import pytest

from projectors.producers.entity_resolution import EntityResolutionProducer
from readmodels.graph.equivalence import same_as_classes
from readmodels.graph.protocol import GraphStore
from readmodels.retrieval.model import Query, QueryResult
from readmodels.retrieval.read_models import ReadModels
from readmodels.retrieval.retriever import Retriever
from tests import test_graph_support as support
from tests.causal_support import MemoryState
from tests.test_entity_resolution import StateOnly
from tests.test_graph_support import SessionLog, fact, project

pytestmark = pytest.mark.anyio
backend = support.backend
graph_store = support.graph_store
fresh_store = support.fresh_store

SESSION = "r1"
TOKENS = "Issues login tokens"
PORT = "Listens on port 8443"


async def story() -> tuple[SessionLog, dict[str, Any]]:
    """Two spellings, each with a fact and an edge, and the producer's real proposal linking them."""
    log = SessionLog(SESSION)
    log.add(
        "memory.fact.asserted",
        fact(
            ("auth-service", "service", TOKENS),
            ("postgres", "database", "Primary store"),
            relations=[("auth-service", "depends_on", "postgres")],
        ),
    )
    log.add(
        "memory.fact.asserted",
        fact(
            ("Auth Service", "service", PORT),
            ("team-identity", "team", "Identity team"),
            relations=[("Auth Service", "owned_by", "team-identity")],
        ),
    )
    view, producer = StateOnly(MemoryState()), EntityResolutionProducer()
    derived = [d for event in log.events for d in await producer.process(event, view)]
    (proposal,) = derived
    log.add(proposal.type, proposal.payload, actor="producer:entity_resolution")
    return log, proposal.payload


async def neighbour_names(store: GraphStore) -> set[str]:
    return {n.entity.name for n in await store.neighbours(SESSION, "auth-service", "service")}


async def ask(store: GraphStore) -> QueryResult:
    retriever = Retriever(lambda: ReadModels(graph=store))
    return await retriever.query(Query(text="auth-service", session=SESSION, lanes=["exact", "traversal"]))


def service_hits(result: QueryResult) -> list[str]:
    return [hit.summary for hit in result.hits if hit.type == "service"]


def apart(result: QueryResult) -> None:
    """auth-service answers with its own fact only; Auth Service, if reached, is a separate inferred hit."""
    hits = {hit.entity: hit for hit in result.hits if hit.type == "service"}
    assert hits["auth-service"].summary == TOKENS
    assert "Auth Service" not in hits or hits["Auth Service"].inferred is not None


async def test_only_an_accepted_same_as_makes_one_entity_and_a_retraction_splits_it(
    graph_store: GraphStore,
) -> None:
    log, proposal = await story()
    await project(graph_store, log.events)
    assert proposal["review_status"] == "proposed"
    assert await neighbour_names(graph_store) == {"postgres", "Auth Service"}  # an inferred edge, no more
    apart(await ask(graph_store))
    (edge,) = await graph_store.relations(SESSION, relation_type="same_as")
    assert edge.review_status == "proposed"
    source = await graph_store.entity_versions(SESSION, edge.source_name, edge.source_entity_type)
    assert await graph_store.read(same_as_classes([source[-1].uid])) == {}

    accepted = log.add(
        "inference.edge.generated", {**proposal, "review_status": "accepted"}, actor="reviewer"
    )
    await project(graph_store, [accepted])
    (edge,) = await graph_store.relations(SESSION, relation_type="same_as")
    assert (edge.review_status, edge.edge_id) == ("accepted", proposal["edge_id"])
    assert await neighbour_names(graph_store) == {"postgres", "team-identity"}  # both entities' edges
    result = await ask(graph_store)
    (summary,) = service_hits(result)  # one entity: the two spellings answer once
    assert TOKENS in summary and f"same as Auth Service: {PORT}" in summary
    (hit,) = [h for h in result.hits if h.type == "service"]
    cited = {c.seq for c in hit.citations}
    assert {1, 2, accepted.seq} <= cited
    assert "team-identity" in {h.entity for h in result.hits}
    versions = await graph_store.entity_versions(SESSION, "Auth Service", "service")
    assert [v.summary for v in versions] == [PORT]  # the originals are unchanged

    retracted = log.add(
        "inference.edge.retracted", {"edge_id": proposal["edge_id"], "reason": "two services after all"}
    )
    await project(graph_store, [retracted])
    assert await graph_store.relations(SESSION, relation_type="same_as") == []
    assert await neighbour_names(graph_store) == {"postgres"}
    apart(await ask(graph_store))
    assert service_hits(await ask(graph_store)) == [TOKENS]
