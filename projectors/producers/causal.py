"""A cited `outcome.explained` -> `causal.edge.generated` (proposed, non-authoritative).

Only explanations that name their cause event by seq and hash are used: the runtime checks that event against
the log before appending, so every causal edge points at something that really happened.
"""

from __future__ import annotations

from typing import Any, Final

from eventloom.event import Event, citation
from eventloom.schemas.catalogue_inference import OutcomeExplained
from projectors.producers._common import cites_earlier, edge_id, event_evidence, read_payload
from projectors.protocol import CitedEvent, DerivedEvent

SOURCE_TYPE: Final = "outcome.explained"
DERIVED_TYPE: Final = "causal.edge.generated"
METHOD: Final = "outcome_explained_citation_v1"
# An agent's explanation that cites a verified cause event is direct testimony, so it ranks above
# co-occurrence heuristics; but "X caused Y" is interpretation, weaker than a task's own statement of which
# decision it implemented (0.86), and it stays unreviewed. Hence a ceiling of 0.8. An explainer who says they
# are less sure lowers it: the producer never claims more certainty than its source.
CONFIDENCE_CEILING: Final = 0.8


class CausalProducer:
    """Proposes one `causal_<taxonomy>` edge per outcome explanation that cites its cause event."""

    name: str = "causal"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    def derive(self, event: Event) -> list[DerivedEvent]:
        if event.type != SOURCE_TYPE:
            return []
        explained = read_payload(event.payload, OutcomeExplained)
        if (
            explained is None
            or explained.cause_event_seq is None
            or explained.cause_event_hash is None
            or not cites_earlier(explained.cause_event_seq, event.seq)
        ):
            return []
        cause_seq, cause_hash = explained.cause_event_seq, explained.cause_event_hash
        cause = explained.cause or citation(event.session, cause_seq, cause_hash)
        confidence = CONFIDENCE_CEILING
        if explained.confidence is not None:
            confidence = min(float(explained.confidence), CONFIDENCE_CEILING)
        relation_type = f"causal_{explained.taxonomy}"
        evidence: list[dict[str, Any]] = [
            event_evidence(event.session, cause_seq, cause_hash),
            event_evidence(event.session, event.seq, event.hash),
        ]
        # The explainer's own evidence, already checked against the schema by `read_payload`.
        evidence.extend(dict(item) for item in event.payload.get("evidence", []))
        payload = {
            "edge_id": edge_id("causal", METHOD, event.session, cause_hash, explained.outcome, relation_type),
            "cause": cause,
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
        }
        return [
            DerivedEvent(
                type=DERIVED_TYPE,
                payload=payload,
                key=relation_type,
                requires=[CitedEvent(event.session, cause_seq, cause_hash)],
            )
        ]
