"""The traversal lane: entities connected to the best entities found, weighted by how far and how trusted.

A neighbour reached over an asserted edge scores `1 / 2^(depth-1)`; over an inferred or causal edge, that
times the edge's trust, which the inferred-edge read model keeps (confidence x method x provenance x
evidence coverage, see `readmodels.inferred.model`). An edge that read model does not know yet (it may lag
the graph) gets the same formula from the edge's own audit fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from eventloom.event import citation
from readmodels.graph.equivalence import same_as_classes
from readmodels.graph.lookup import neighbours_of
from readmodels.graph.records import RelationEdge
from readmodels.inferred.model import edge_key, trust_score
from readmodels.retrieval.lanes import Candidate, entity_candidate_key
from readmodels.retrieval.model import InferredLink
from readmodels.retrieval.protocol import GraphReads, TrustLookup

MAX_SEEDS: Final = 3
FANOUT: Final = 100
"""Edges read per direction and hop: a hub entity with thousands of edges costs what a small one does."""
DEPTH_DECAY: Final = 0.5
CAUSAL_EVENT: Final = "causal.edge.generated"


def edge_kind(edge: RelationEdge) -> Literal["inferred", "causal"]:
    return "causal" if edge.source_event_type == CAUSAL_EVENT else "inferred"


def trust_key(edge: RelationEdge) -> str:
    return edge_key(edge.session, edge.edge_id, edge.source_name, edge.target_name, edge.relation_type)


def own_trust(edge: RelationEdge) -> float:
    """Trust from the edge's own fields: each evidence item counts as cited when it has a hash or URI."""
    cited = max(len(edge.evidence_event_hashes), len(edge.evidence_citations))
    items = max(cited, len(edge.evidence_quotes), len(edge.evidence_event_seqs))
    coverage = min(1.0, cited / items) if items else 0.0
    has_source = edge.derived_from_event_seq is not None and edge.derived_from_event_hash is not None
    return trust_score(edge.confidence or 0.0, edge.inference_method or "", has_source, coverage)


def inferred_link(edge: RelationEdge, trust: float) -> InferredLink:
    return InferredLink(
        source=edge.source_name,
        relation_type=edge.relation_type,
        target=edge.target_name,
        kind=edge_kind(edge),
        confidence=edge.confidence or 0.0,
        method=edge.inference_method or "",
        trust=trust,
        citation=citation(edge.session, edge.source_event_seq, edge.source_event_hash),
        cited_source=edge.derived_from_event_seq is not None and edge.derived_from_event_hash is not None,
    )


class TraversalLane:
    name = "traversal"

    def __init__(self, graph: GraphReads, trust: TrustLookup | None) -> None:
        self.graph = graph
        self.trust = trust

    async def search(
        self, seeds: Sequence[str], depth: int, as_of: str | None, include_inferred: bool
    ) -> tuple[list[Candidate], dict[str, InferredLink]]:
        """Neighbours of the seed versions (uids), and the inferred link of those reached only by one."""
        if not seeds or depth <= 0:
            return [], {}
        start = list(seeds[:MAX_SEEDS])
        classes = await self.graph.read(same_as_classes(start, as_of))  # one entity: every member's edges
        start += [member.uid for found in classes.values() for member in found.members]
        reached = await self.graph.read(neighbours_of(start, depth, as_of, include_inferred, FANOUT))
        trusted = await self._trust([n.via for n in reached if n.via.inferred])
        candidates: list[Candidate] = []
        links: dict[str, InferredLink] = {}
        for neighbour in reached:
            entity = neighbour.entity
            key = entity_candidate_key(entity.session, entity.name, entity.entity_type)
            weight = DEPTH_DECAY ** (neighbour.depth - 1)
            if neighbour.via.inferred:
                trust = trusted.get(trust_key(neighbour.via), own_trust(neighbour.via))
                weight *= trust
                links[key] = inferred_link(neighbour.via, trust)
            if weight > 0:
                candidates.append(Candidate(key=key, score=round(weight, 6), neighbour=neighbour))
        candidates.sort(key=lambda c: (-c.score, c.key))
        return candidates, links

    async def _trust(self, edges: list[RelationEdge]) -> dict[str, float]:
        if not edges or self.trust is None:
            return {}
        return await self.trust.trust([trust_key(edge) for edge in edges])
