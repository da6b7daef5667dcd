"""`inference.edge.contradicted` -> `inference.edge.retracted` for the same edge.

Inferred edges are non-authoritative: once evidence speaks against one, it is withdrawn rather than weighed.
The retraction names the edge exactly as the contradiction did and points back at it by hash.
"""

from __future__ import annotations

from typing import Any, Final

from eventloom.event import Event
from eventloom.schemas.catalogue_inference import InferenceEdgeContradicted
from projectors.producers._common import read_payload
from projectors.protocol import DerivedEvent

SOURCE_TYPE: Final = "inference.edge.contradicted"
DERIVED_TYPE: Final = "inference.edge.retracted"


class RetractionProducer:
    """Retracts every inferred edge a contradiction names."""

    name: str = "retraction"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    def derive(self, event: Event) -> list[DerivedEvent]:
        if event.type != SOURCE_TYPE:
            return []
        contradiction = read_payload(event.payload, InferenceEdgeContradicted)
        if contradiction is None:
            return []
        payload: dict[str, Any] = {}
        if contradiction.edge_id is not None:
            payload["edge_id"] = contradiction.edge_id
        if (
            contradiction.source is not None
            and contradiction.target is not None
            and contradiction.relation_type is not None
        ):
            payload["source"] = contradiction.source
            payload["target"] = contradiction.target
            payload["relation_type"] = contradiction.relation_type
        payload["reason"] = contradiction.reason
        payload["retracted_by_event_hash"] = event.hash
        return [DerivedEvent(type=DERIVED_TYPE, payload=payload, key="retraction")]
