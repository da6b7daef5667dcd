"""`GraphProjector`: the built-in projector that keeps the temporal memory graph up to date."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from eventloom.event import Event
from projectors.graph.registry import extract
from readmodels.graph.protocol import GraphWriter

W = TypeVar("W", bound=GraphWriter)


class GraphProjector(Generic[W]):
    """Extracts each event (pure) and applies the batch to a graph store in one transaction.

    The store keeps the applied seq per (projector `name`, session) in the same transaction as the
    projection, so redelivered events are skipped and effects are exactly once.
    """

    def __init__(self, store: W, name: str = "graph", skipped_sessions: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.name = name
        self.skipped_sessions = skipped_sessions

    async def open(self) -> None:
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [extract(event) for event in events])

    async def close(self) -> None:
        await self.store.close()
