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
from eventloom.stages import StageTimes
from readmodels.tracking import Housekeeping, TrackingRecorder

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
        self.stages = StageTimes()

    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        await self.store.close()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        with self.stages.timed("extract"):
            batch = [self.translate(event) for event in events]
        with self.stages.timed("write"):
            await self.store.apply(self.name, batch)

    async def idle(self) -> None:
        """The runner found nothing to apply: the store's housekeeping, if it has any."""
        if isinstance(self.store, Housekeeping):
            await self.store.idle()

    def stage_times(self) -> StageTimes:
        """Extract and write, and within write the store's own stages (`write.<stage>`) where it has them."""
        store_stages = getattr(self.store, "stages", None)
        if isinstance(store_stages, StageTimes):
            return self.stages.merged(store_stages, prefix="write.")
        return self.stages.copy()
