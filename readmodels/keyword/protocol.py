"""The `KeywordStore` contract and the plain structs that cross it.

A document is one searchable text an event contributed: an entity as asserted (name and summary), a span
of a source (a document chunk with its lines), or the event's own verbatim text (a transcript turn, a
command and its output, a decision and its rationale, an explanation). Documents are immutable, like the
events they come from; an as-of search only sees documents of events at or before that time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

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


class KeywordDoc(msgspec.Struct, frozen=True, kw_only=True):
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


class KeywordHit(msgspec.Struct, frozen=True, kw_only=True):
    """A document that matched, with its BM25 score (higher is better) and the event's citation."""

    doc: KeywordDoc
    score: float
    citation: str


class EventDocs(msgspec.Struct, frozen=True, kw_only=True):
    """The documents of one event (possibly none: the event still advances the checkpoint)."""

    session: str
    seq: int
    event_hash: str
    docs: tuple[KeywordDoc, ...] = ()


@runtime_checkable
class KeywordStore(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        """The last seq `projector` applied per session."""
        ...

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int:
        """Index a batch and the per-(projector, session) checkpoint in one transaction; events at or
        below the checkpoint are skipped. Returns how many events were applied."""
        ...

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        """BM25 over the words of `text` (any of them; more and rarer matches rank higher)."""
        ...
