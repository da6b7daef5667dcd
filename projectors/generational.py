"""`GenerationalProjector`: a projector whose read model is one embedded file per generation.

The keyword, vector and inferred-edge models are each a SQLite file under `<data>/readmodels/<name>/`
(`projectors.generations`): the live projector writes `current`; `eventloom rebuild <name>` builds the
next generation (`context.generation`) and swaps it in, and the live projector follows `current` when it
is opened again. Each event becomes one batch item (`changes`), applied with the checkpoints in one
transaction by the store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from eventloom.event import Event
from projectors.generations import Generations
from projectors.plugins import PluginContext
from projectors.tracking import TrackingProjector
from readmodels.tracking import TrackingRecorder

S = TypeVar("S", bound=TrackingRecorder[Any])
Item = TypeVar("Item")


class GenerationalProjector(TrackingProjector[S, Item]):
    """A `TrackingProjector` whose store is a file in the live generation (or the one being built)."""

    def __init__(
        self,
        context: PluginContext,
        database: str,
        store: Callable[[Path], S],
        changes: Callable[[Event], Item],
    ) -> None:
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._build_into = context.generation
        self._database_name = database
        self._make_store = store
        super().__init__(context.name, store(self._database()), changes, context.memory_skips)

    def _database(self) -> Path:
        if self._build_into is not None:
            return self._build_into / self._database_name
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / self._database_name

    async def open(self) -> None:
        self.store = self._make_store(self._database())  # the live generation may have been swapped
        await self.store.open()
