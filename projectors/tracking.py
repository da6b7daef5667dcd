"""`TrackingProjector`: the one projector that drives any `readmodels.tracking.TrackingRecorder`.

Each event becomes one batch item (`translate`: the graph's extraction, the memory documents, the
inferred-edge changes), and the store writes the batch and its checkpoints in one transaction. What differs
between the built-in projectors is only that: the store, and the translation. `GraphProjector`,
`GenerationalProjector` (a store per generation) and `InPlaceDocProjector` (a store that can be cleared)
add nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from eventloom.event import Event
from readmodels.tracking import TrackingRecorder

R = TypeVar("R", bound=TrackingRecorder[Any])
Item = TypeVar("Item")


class TrackingProjector(Generic[R, Item]):
    """Projects events into `store` through `translate`, exactly once (the store keeps the checkpoints)."""

    def __init__(
        self,
        name: str,
        store: R,
        translate: Callable[[Event], Item],
        skipped_sessions: frozenset[str] = frozenset(),
    ) -> None:
        self.name = name
        self.store = store
        self.translate = translate
        self.skipped_sessions = skipped_sessions

    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        await self.store.close()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [self.translate(event) for event in events])
