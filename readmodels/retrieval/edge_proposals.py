"""The edge a derived event created, on the hits that event proposed: its own confidence, method and trust.

A `causal.edge.generated` (or `inference.edge.generated`) event is found by its text, and the entities it
named carry it as their source; neither the text nor those entities hold the edge's confidence, the edge
does. Each such proposal hit gets the edge (`Proposal.edge`), read from the graph by the event in one
statement and weighted by the trust the inferred-edge model keeps (the edge's own formula when that model
does not know it yet), so a checkout shows the confidence the edge was proposed with, never a made-up one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from readmodels.graph.identity import event_uid
from readmodels.graph.lookup import edges_asserted_by
from readmodels.graph.records import RelationEdge
from readmodels.retrieval.model import Hit
from readmodels.retrieval.protocol import GraphReads, TrustLookup
from readmodels.retrieval.traversal import inferred_link, own_trust, trust_key

EDGE_EVENT_TYPES: Final = frozenset({"inference.edge.generated", "causal.edge.generated"})


def _asserting_event(hit: Hit) -> str | None:
    """The uid of the edge event a proposal hit rests on (its first citation is that event), or None."""
    proposal = hit.proposal
    if proposal is None or proposal.edge is not None or proposal.source_event_type not in EDGE_EVENT_TYPES:
        return None
    if not hit.citations:
        return None
    first = hit.citations[0]
    return event_uid(first.session, first.seq)


CLOSED: Final = "closed"
"""The status of an edge event's proposal when its edge no longer held at the asked time."""


def _closed(edge: RelationEdge, as_of: str | None) -> bool:
    return edge.valid_to is not None and (as_of is None or edge.valid_to <= as_of)


async def with_proposed_edges(
    graph: GraphReads, trust: TrustLookup | None, hits: Sequence[Hit], as_of: str | None = None
) -> list[Hit]:
    """`hits`, each proposal of an edge event carrying the edge that event created (when it did), `closed`
    when that edge no longer held at `as_of` (now when None)."""
    wanted = {hit.key: uid for hit in hits if (uid := _asserting_event(hit)) is not None}
    if not wanted:
        return list(hits)
    edges = await graph.read(edges_asserted_by(sorted(set(wanted.values()))))
    trusted = await _trust(trust, list(edges.values()))
    enriched: list[Hit] = []
    for hit in hits:
        edge = edges.get(wanted.get(hit.key, ""))
        if edge is None or hit.proposal is None:
            enriched.append(hit)
            continue
        link = inferred_link(edge, trusted.get(trust_key(edge), own_trust(edge)))
        status = CLOSED if _closed(edge, as_of) else hit.proposal.status
        proposal = msgspec.structs.replace(hit.proposal, edge=link, confidence=link.confidence, status=status)
        enriched.append(msgspec.structs.replace(hit, proposal=proposal))
    return enriched


async def _trust(trust: TrustLookup | None, edges: list[RelationEdge]) -> dict[str, float]:
    if trust is None or not edges:
        return {}
    return await trust.trust([trust_key(edge) for edge in edges])
