"""`InPlaceDocProjector`: the keyword or vector projector on Neo4j, where a read model has no generations.

Neo4j community holds one database, shared with the graph, so these models are rebuilt in place:
`eventloom rebuild keyword|vector` clears the model (`clear`) and replays the log into it
(`projectors.rebuild.rebuild_in_place`).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from projectors.memory_docs import memory_docs
from projectors.tracking import TrackingProjector
from readmodels.documents import EventDocs
from readmodels.tracking import TrackingRecorder


class ClearableDocStore(TrackingRecorder[EventDocs], Protocol):
    """A memory-document store (`KeywordStore`, `VectorStore`) that can also delete everything it holds."""

    async def clear(self) -> None: ...


S = TypeVar("S", bound=ClearableDocStore)


class InPlaceDocProjector(TrackingProjector[S, EventDocs]):
    """Projects every event's memory documents into `store`, with its checkpoints in the same transaction."""

    def __init__(self, name: str, store: S, skipped_sessions: frozenset[str] = frozenset()) -> None:
        super().__init__(name, store, memory_docs, skipped_sessions)

    async def clear(self) -> None:
        """Delete the read model's documents and checkpoints (the store must be open)."""
        await self.store.clear()
