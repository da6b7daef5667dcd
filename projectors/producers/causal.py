"""A cited `outcome.explained` -> `causal.edge.generated` (proposed, non-authoritative).

Only explanations that name their cause event by seq and hash are used: the runtime checks that event against
the log before appending, so every causal edge points at something that really happened.

The producer is a `ProcessProducer`: it reads the cited cause event (`LogView.event`) to attach the edge to
the entity that event is about (`projectors.producers.subjects`): a `decision.made` makes the cause end the
decision, an `issue.diagnosed` the issue, a `task.*` the task, an earlier `outcome.explained` that outcome;
any other cause stays an entity of type `cause` named by the explanation's `cause` line. The effect end is
always the explained outcome (type `outcome`), and the outcome is linked to what it concerns (`about`) by
graph extraction. `derive(event, cause)` is the pure part, given the cause event (or None).
"""

from __future__ import annotations

from typing import Any, Final

from eventloom.event import Event, citation
from eventloom.schemas import current_fields
from eventloom.schemas.catalogue_inference import OutcomeExplained
from projectors.producers._common import cites_earlier, edge_id, event_evidence, read_event
from projectors.producers.subjects import NAME_LIMIT, subject_of
from projectors.protocol import CitedEvent, DerivedEvent, LogView

SOURCE_TYPE: Final = "outcome.explained"
DERIVED_TYPE: Final = "causal.edge.generated"
METHOD: Final = "outcome_explained_citation_v1"
# An agent's explanation that cites a verified cause event is direct testimony, so it ranks above
# co-occurrence heuristics; but "X caused Y" is interpretation, weaker than a task's own statement of which
# decision it implemented (0.86), and it stays unreviewed. Hence a ceiling of 0.8. An explainer who says they
# are less sure lowers it: the producer never claims more certainty than its source.
CONFIDENCE_CEILING: Final = 0.8


def _cited(event: Event) -> OutcomeExplained | None:
    """The explanation, when it fully cites an earlier cause event."""
    if event.type != SOURCE_TYPE:
        return None
    explained = read_event(event, OutcomeExplained)
    if (
        explained is None
        or explained.cause_event_seq is None
        or explained.cause_event_hash is None
        or not cites_earlier(explained.cause_event_seq, event.seq)
    ):
        return None
    return explained


class CausalProducer:
    """Proposes one `causal_<taxonomy>` edge per outcome explanation that cites its cause event."""

    name: str = "causal"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        """Read the cited cause event, then derive. When it is not in the log with that hash the edge is
        still derived, unattached, and the runtime refuses to emit it (its `requires` do not hold)."""
        explained = _cited(event)
        if explained is None:
            return []
        assert explained.cause_event_seq is not None
        return self.derive(event, await log.event(event.session, explained.cause_event_seq))

    def derive(self, event: Event, cause: Event | None = None) -> list[DerivedEvent]:
        """The edge `event` explains; its cause end is the entity `cause` (the cited event) is about."""
        explained = _cited(event)
        if explained is None:
            return []
        assert explained.cause_event_seq is not None and explained.cause_event_hash is not None
        cause_seq, cause_hash = explained.cause_event_seq, explained.cause_event_hash
        confidence = CONFIDENCE_CEILING
        if explained.confidence is not None:
            confidence = min(float(explained.confidence), CONFIDENCE_CEILING)
        relation_type = f"causal_{explained.taxonomy}"
        evidence: list[dict[str, Any]] = [
            event_evidence(event.session, cause_seq, cause_hash),
            event_evidence(event.session, event.seq, event.hash),
        ]
        # The explainer's own evidence, already checked against the schema by `read_event`.
        evidence.extend(dict(item) for item in current_fields(event).get("evidence", []))
        payload: dict[str, Any] = {
            "edge_id": edge_id("causal", METHOD, event.session, cause_hash, explained.outcome, relation_type),
            "cause": explained.cause or citation(event.session, cause_seq, cause_hash),
            "effect": explained.outcome,
            "taxonomy": explained.taxonomy,
            "relation_type": relation_type,
            "confidence": confidence,
            "method": METHOD,
            "review_status": "proposed",
            "authority_status": "non_authoritative",
            "source_event_seq": event.seq,
            "source_event_hash": event.hash,
            "evidence": evidence,
            "effect_entity": {"name": explained.outcome[:NAME_LIMIT], "entity_type": "outcome"},
        }
        subject = None if cause is None or cause.hash != cause_hash else subject_of(cause)
        if subject is not None:
            payload["cause_entity"] = subject
        return [
            DerivedEvent(
                type=DERIVED_TYPE,
                payload=payload,
                key=relation_type,
                requires=[CitedEvent(event.session, cause_seq, cause_hash)],
            )
        ]
