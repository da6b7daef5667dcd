"""What an event changes in the inferred-edge read model (pure).

`inference.edge.generated` and `causal.edge.generated` record an edge, with its trust; a retraction marks
the edge it names (by `edge_id` or by source, target and relation type); a contradiction is counted. Other
events change nothing, and only advance the checkpoint.
"""

from __future__ import annotations

from typing import Any

import msgspec

from eventloom.event import Event
from eventloom.schemas.catalogue_inference import (
    CausalEdgeGenerated,
    InferenceEdgeContradicted,
    InferenceEdgeGenerated,
    InferenceEdgeRetracted,
)
from projectors.graph.extraction import read_as
from readmodels.inferred.model import (
    Change,
    Contradicted,
    EdgeKind,
    EventChanges,
    Generated,
    InferredEdge,
    Retracted,
    edge_key,
    evidence_coverage,
    trust_score,
)


def _generated(event: Event, kind: EdgeKind, source: str, target: str, payload: Any) -> Generated:
    evidence = [msgspec.to_builtins(item) for item in payload.evidence]
    coverage = evidence_coverage(evidence)
    cited = payload.source_event_seq is not None and payload.source_event_hash is not None
    edge = InferredEdge(
        key=edge_key(event.session, payload.edge_id, source, target, payload.relation_type),
        session=event.session,
        kind=kind,
        edge_id=payload.edge_id,
        source=source,
        target=target,
        relation_type=payload.relation_type,
        method=payload.method,
        confidence=payload.confidence,
        review_status=getattr(payload, "review_status", None),
        authority_status=getattr(payload, "authority_status", None),
        source_event_seq=payload.source_event_seq,
        source_event_hash=payload.source_event_hash,
        evidence_total=len(evidence),
        evidence_coverage=round(coverage, 4),
        generated_seq=event.seq,
        generated_hash=event.hash,
        generated_ts=event.ts,
        trust=trust_score(payload.confidence, payload.method, cited, coverage),
    )
    triple = edge_key(event.session, None, source, target, payload.relation_type)
    return Generated(edge=edge, triple_key=triple)


def _names(event: Event, payload: InferenceEdgeRetracted | InferenceEdgeContradicted) -> tuple[str, ...]:
    names = []
    if payload.edge_id:
        names.append(edge_key(event.session, payload.edge_id, "", "", ""))
    if payload.source and payload.target and payload.relation_type:
        names.append(edge_key(event.session, None, payload.source, payload.target, payload.relation_type))
    return tuple(names)


def _change(event: Event) -> Change | None:
    if event.type == "inference.edge.generated":
        inferred = read_as(event, InferenceEdgeGenerated)
        return _generated(event, "inferred", inferred.source, inferred.target, inferred)
    if event.type == "causal.edge.generated":
        causal = read_as(event, CausalEdgeGenerated)
        return _generated(event, "causal", causal.cause, causal.effect, causal)
    if event.type == "inference.edge.retracted":
        retracted = msgspec.convert(event.payload, InferenceEdgeRetracted)
        return Retracted(
            session=event.session,
            keys=_names(event, retracted),
            seq=event.seq,
            ts=event.ts,
            reason=retracted.reason,
        )
    if event.type == "inference.edge.contradicted":
        contradicted = msgspec.convert(event.payload, InferenceEdgeContradicted)
        return Contradicted(session=event.session, keys=_names(event, contradicted))
    return None


def inferred_changes(event: Event) -> EventChanges:
    """The changes `event` makes; a payload that no longer fits its schema changes nothing."""
    try:
        change = _change(event)
    except (msgspec.ValidationError, ValueError):
        change = None
    return EventChanges(
        session=event.session,
        seq=event.seq,
        event_hash=event.hash,
        changes=() if change is None else (change,),
    )
