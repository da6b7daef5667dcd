"""`InPlaceDocProjector`: the keyword or vector projector on Neo4j, where a read model has no generations.

Neo4j community holds one database, shared with the graph, so these models are rebuilt in place:
`eventloom rebuild keyword|vector` clears the model (`clear`) and replays the log into it
(`projectors.rebuild.rebuild_in_place`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from eventloom.event import Event
from projectors.memory_docs import memory_docs
from readmodels.documents import EventDocs


class ClearableDocStore(Protocol):
    """A memory-document store (`KeywordStore`, `VectorStore`) that can also delete everything it holds."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]: ...

    async def apply(self, projector: str, batch: Sequence[EventDocs]) -> int: ...

    async def clear(self) -> None: ...


S = TypeVar("S", bound=ClearableDocStore)


class InPlaceDocProjector(Generic[S]):
    """Projects every event's memory documents into `store`, with its checkpoints in the same transaction."""

    def __init__(self, name: str, store: S, skipped_sessions: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.store = store
        self.skipped_sessions = skipped_sessions

    async def open(self) -> None:
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [memory_docs(event) for event in events])

    async def close(self) -> None:
        await self.store.close()

    async def clear(self) -> None:
        """Delete the read model's documents and checkpoints (the store must be open)."""
        await self.store.clear()
