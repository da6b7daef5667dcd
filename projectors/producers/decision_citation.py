"""`task.completed` citing the decision it carried out -> `inference.edge.generated`.

The task says, in its own completion event, which decision it implemented and names that decision's event by
seq and hash. That is an explicit, verifiable claim, but still the task author's claim about their own work
(not a reviewed fact), hence an inferred edge with confidence 0.86 rather than an asserted relation.
"""

from __future__ import annotations

from typing import Final

from eventloom.event import Event
from eventloom.schemas.catalogue_work import TaskCompleted
from projectors.producers._common import cites_earlier, edge_id, event_evidence, fit, read_payload
from projectors.protocol import CitedEvent, DerivedEvent

SOURCE_TYPE: Final = "task.completed"
DERIVED_TYPE: Final = "inference.edge.generated"
RELATION_TYPE: Final = "likely_implemented_decision"
METHOD: Final = "task_completed_decision_citation_v1"
CONFIDENCE: Final = 0.86
NAME_LIMIT: Final = 512  # `Name` in the payload schemas


class DecisionCitationProducer:
    """Emits one `likely_implemented_decision` edge per task completion that fully cites a decision."""

    name: str = "decision_citation"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    def derive(self, event: Event) -> list[DerivedEvent]:
        if event.type != SOURCE_TYPE:
            return []
        task = read_payload(event.payload, TaskCompleted)
        if (
            task is None
            or task.decision is None
            or not task.decision.strip()
            or task.decision_event_seq is None
            or task.decision_event_hash is None
            or not cites_earlier(task.decision_event_seq, event.seq)
        ):
            return []
        source = task.task_id
        target = fit(task.decision, NAME_LIMIT)
        payload = {
            "edge_id": edge_id("inf", METHOD, event.session, source, target),
            "source": source,
            "target": target,
            "relation_type": RELATION_TYPE,
            "confidence": CONFIDENCE,
            "method": METHOD,
            "source_event_seq": event.seq,
            "source_event_hash": event.hash,
            "evidence": [
                event_evidence(event.session, event.seq, event.hash),
                event_evidence(event.session, task.decision_event_seq, task.decision_event_hash),
            ],
        }
        return [
            DerivedEvent(
                type=DERIVED_TYPE,
                payload=payload,
                key=RELATION_TYPE,
                requires=[CitedEvent(event.session, task.decision_event_seq, task.decision_event_hash)],
            )
        ]
