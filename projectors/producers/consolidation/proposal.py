"""A proposal before it is written down: what it cites, and its `consolidation.candidate.created` event."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from eventloom.event import Event
from projectors.producers._common import edge_id
from projectors.producers.consolidation.summaries import Summary, SummaryRequest
from projectors.protocol import CitedEvent, DerivedEvent

DERIVED_TYPE: Final = "consolidation.candidate.created"


@dataclass(frozen=True)
class Proposal:
    """One candidate: its citations are fixed here; only `summary` may be rewritten by a writer."""

    candidate_type: Literal["episode", "claim", "procedure"]
    cited: tuple[CitedEvent, ...]
    texts: tuple[str, ...]
    summary: Summary
    confidence: float
    method: str
    purpose: str
    about: tuple[tuple[str, str], ...] = ()
    relations: tuple[tuple[str, str, str], ...] = field(default=())

    @property
    def candidate_id(self) -> str:
        """Derived from the type, the method and exactly what it cites: the same proposal, the same id."""
        return edge_id("cand", self.candidate_type, self.method, *(c.hash for c in self.cited))

    def request(self) -> SummaryRequest:
        return SummaryRequest(candidate_type=self.candidate_type, texts=self.texts, draft=self.summary)

    def derived(self, summary: Summary) -> DerivedEvent:
        payload: dict[str, Any] = {
            "candidate_id": self.candidate_id,
            "candidate_type": self.candidate_type,
            "title": summary.title,
            "summary": summary.summary,
            "source_events": [{"session": c.session, "seq": c.seq, "hash": c.hash} for c in self.cited],
            "confidence": self.confidence,
            "method": self.method,
            "purpose": self.purpose,
            "about": [{"name": name, "entity_type": kind} for name, kind in self.about],
            "relations": [
                {"source": source, "relation_type": kind, "target": target}
                for source, kind, target in self.relations
            ],
            "summary_by": summary.summary_by,
        }
        return DerivedEvent(
            type=DERIVED_TYPE,
            payload=payload,
            key=f"{self.candidate_type}:{self.candidate_id}",
            requires=list(self.cited),
        )


def cite(event: Event) -> CitedEvent:
    return CitedEvent(event.session, event.seq, event.hash)
