"""`GenerationalProjector`: a projector whose read model is one embedded file per generation.

The keyword, vector and inferred-edge models are each a SQLite file under `<data>/readmodels/<name>/`
(`projectors.generations`): the live projector writes `current`; `eventloom rebuild <name>` builds the
next generation (`context.generation`) and swaps it in, and the live projector follows `current` when it
is opened again. Each event becomes one batch item (`changes`), applied with the checkpoints in one
transaction by the store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from eventloom.event import Event
from projectors.generations import Generations
from projectors.plugins import PluginContext

Item_contra = TypeVar("Item_contra", contravariant=True)


class EmbeddedStore(Protocol[Item_contra]):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]: ...

    async def apply(self, projector: str, batch: Sequence[Item_contra]) -> int: ...


S = TypeVar("S", bound=EmbeddedStore[Any])
Item = TypeVar("Item")


class GenerationalProjector(Generic[S, Item]):
    def __init__(
        self,
        context: PluginContext,
        database: str,
        store: Callable[[Path], S],
        changes: Callable[[Event], Item],
    ) -> None:
        self.name = context.name
        self.skipped_sessions = context.memory_skips
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._build_into = context.generation
        self._database_name = database
        self._make_store = store
        self._changes = changes
        self.store = store(self._database())

    def _database(self) -> Path:
        if self._build_into is not None:
            return self._build_into / self._database_name
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / self._database_name

    async def open(self) -> None:
        self.store = self._make_store(self._database())
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [self._changes(event) for event in events])

    async def close(self) -> None:
        await self.store.close()
