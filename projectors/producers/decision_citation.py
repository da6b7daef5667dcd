"""`task.completed` citing the decision it carried out -> `inference.edge.generated`.

The task says, in its own completion event, which decision it implemented and names that decision's event by
seq and hash. That is an explicit, verifiable claim, but still the task author's claim about their own work
(not a reviewed fact), hence an inferred edge with confidence 0.86 rather than an asserted relation.

The producer is a `ProcessProducer`: it reads the cited event so the edge targets the decision entity
(`decision_id`, the entity graph extraction made of the `decision.made`), not an entity named after the
task's line of text. When the cited event is not a `decision.made` the target stays that text. The edge id
is computed from the task and that text as before, so an edge keeps its id whichever entity it targets.
"""

from __future__ import annotations

from typing import Final

from eventloom.event import Event
from eventloom.schemas.catalogue_work import TaskCompleted
from projectors.producers._common import cites_earlier, edge_id, event_evidence, fit, read_payload
from projectors.producers.subjects import subject_of
from projectors.protocol import CitedEvent, DerivedEvent, LogView

SOURCE_TYPE: Final = "task.completed"
DERIVED_TYPE: Final = "inference.edge.generated"
RELATION_TYPE: Final = "likely_implemented_decision"
METHOD: Final = "task_completed_decision_citation_v1"
CONFIDENCE: Final = 0.86
NAME_LIMIT: Final = 512  # `Name` in the payload schemas


def _cited(event: Event) -> TaskCompleted | None:
    """The completion, when it fully cites an earlier decision event."""
    if event.type != SOURCE_TYPE:
        return None
    task = read_payload(event.payload, TaskCompleted)
    if (
        task is None
        or task.decision is None
        or not task.decision.strip()
        or task.decision_event_seq is None
        or task.decision_event_hash is None
        or not cites_earlier(task.decision_event_seq, event.seq)
    ):
        return None
    return task


class DecisionCitationProducer:
    """Emits one `likely_implemented_decision` edge per task completion that fully cites a decision."""

    name: str = "decision_citation"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        """Read the cited decision event, then derive. When it is not in the log with that hash the edge is
        still derived, and the runtime refuses to emit it (its `requires` do not hold)."""
        task = _cited(event)
        if task is None:
            return []
        assert task.decision_event_seq is not None
        return self.derive(event, await log.event(event.session, task.decision_event_seq))

    def derive(self, event: Event, decision: Event | None = None) -> list[DerivedEvent]:
        """The edge `event` claims; it targets the decision entity when `decision` is the cited
        `decision.made`, else an entity named by the task's `decision` text."""
        task = _cited(event)
        if task is None:
            return []
        assert task.decision is not None
        assert task.decision_event_seq is not None and task.decision_event_hash is not None
        source = task.task_id
        title = fit(task.decision, NAME_LIMIT)
        subject = None
        if decision is not None and decision.hash == task.decision_event_hash:
            subject = subject_of(decision) if decision.type == "decision.made" else None
        payload = {
            "edge_id": edge_id("inf", METHOD, event.session, source, title),
            "source": source,
            "target": title if subject is None else subject["name"],
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
