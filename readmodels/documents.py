"""Memory documents: the searchable texts an event contributes, shared by the keyword and vector models.

A document is one text an event contributed: an entity as asserted (name and summary), a span of a source
(a document chunk with its lines), or the event's own verbatim text (a transcript turn, a command and its
output, a decision and its rationale, an explanation). Documents are immutable, like the events they come
from; an as-of search only sees documents of events at or before that time.
"""

from __future__ import annotations

from typing import Literal

import msgspec

DocKind = Literal["entity", "source", "turn", "command", "decision", "explanation", "code", "event"]
DOC_KINDS: tuple[DocKind, ...] = (
    "entity",
    "source",
    "turn",
    "command",
    "decision",
    "explanation",
    "code",
    "event",
)


class MemoryDoc(msgspec.Struct, frozen=True, kw_only=True):
    """One searchable text, with where it came from (enough to cite it)."""

    session: str
    seq: int
    event_hash: str
    event_type: str
    ts: str
    kind: DocKind
    text: str
    title: str = ""
    entity_name: str | None = None
    entity_type: str | None = None
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    context: str = ""
    """Words borrowed from the turns before it in its session (`readmodels.keyword.context`), indexed by
    the keyword model only: never shown as the turn's text, never embedded, and not in a search hit."""


def doc_identity(doc: MemoryDoc) -> tuple[object, ...]:
    """What tells one document from another (its event, kind, entity and span): the same in every store."""
    return (
        doc.session,
        doc.seq,
        doc.kind,
        doc.entity_name,
        doc.entity_type,
        doc.path,
        doc.line_start,
        doc.line_end,
    )


class EventDocs(msgspec.Struct, frozen=True, kw_only=True):
    """The documents of one event (possibly none: the event still advances the checkpoint)."""

    session: str
    seq: int
    event_hash: str
    docs: tuple[MemoryDoc, ...] = ()


class ScoreSpread(msgspec.Struct, frozen=True, kw_only=True):
    """How one search's scores spread over every document it could have returned (the documents passing
    its filters, matched or not): what turns a raw score into "how unusual is this document for this
    question" (a z-score), comparable across lanes, questions and corpora."""

    documents: int
    mean: float
    std: float

    def z(self, score: float) -> float:
        return (score - self.mean) / self.std if self.std > 0 else 0.0
