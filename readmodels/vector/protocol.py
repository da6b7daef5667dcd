"""The `VectorStore` contract: memory documents (`readmodels.documents`) searched by cosine similarity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec

from readmodels.documents import DocKind, EventDocs, MemoryDoc
from readmodels.tracking import TrackingRecorder


class VectorHit(msgspec.Struct, frozen=True, kw_only=True):
    """A document near the query, with the event's citation and the vector space (tag) it was found in."""

    doc: MemoryDoc
    score: float
    """Cosine similarity to the query, from -1 to 1."""
    citation: str
    tag: str


def embedded_text(doc: MemoryDoc) -> str:
    """What of a document is embedded; every backend embeds the same text, so their scores agree."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


@runtime_checkable
class VectorStore(TrackingRecorder[EventDocs], Protocol):
    tag: str
    """The vector space of this store's embedder (`readmodels.vector.embedders.tag`); only vectors of
    this tag are ever compared with a query."""

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[VectorHit]:
        """The `limit` documents most similar to `text` among those passing the filters, best first."""
        ...
