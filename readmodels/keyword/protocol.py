"""The `KeywordStore` contract: BM25 over memory documents (`readmodels.documents`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import msgspec

from readmodels.documents import DocKind, EventDocs, MemoryDoc
from readmodels.tracking import TrackingRecorder

MAX_QUERY_WORDS: Final = 32
"""A question's words searched at most, on every backend."""
TITLE_WEIGHT: Final = 2.0
"""BM25 weight of the title column (entity names, document titles) against the body text's 1.0."""
CONTEXT_WEIGHT: Final = 0.5
"""BM25 weight of a turn's borrowed context (`readmodels.keyword.context`) against its text's 1.0: the
turn counts twice against the words it borrows."""


class KeywordHit(msgspec.Struct, frozen=True, kw_only=True):
    """A document that matched, with its BM25 score (higher is better) and the event's citation."""

    doc: MemoryDoc
    score: float
    citation: str


@runtime_checkable
class KeywordStore(TrackingRecorder[EventDocs], Protocol):
    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> list[KeywordHit]:
        """BM25 over the words of `text` (any of them; more and rarer matches rank higher).

        A document whose only matches are words common to much of the index may be left out (the embedded
        store's `readmodels.keyword.common_words`); every document returned is scored with all the words.
        """
        ...
