"""The `inferred` entry point: the inferred-edge audit view in SQLite under `<data>/readmodels/inferred`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eventloom.event import Event
from projectors.inferred.extract import inferred_changes
from projectors.plugins import PluginContext
from readmodels.generations import Generations
from readmodels.inferred.sqlite_store import SqliteInferredStore

DATABASE = "inferred.sqlite"


def live_database(state_dir: Path) -> Path:
    """The live generation's database (what `eventloom memory inferred-status` reads)."""
    return Generations(state_dir).current() / DATABASE


class InferredProjector:
    """Keeps the audit view of every inferred and causal edge; rebuildable like the keyword model."""

    def __init__(self, context: PluginContext) -> None:
        self.name = context.name
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._build_into = context.generation
        self.store = SqliteInferredStore(self._database())

    def _database(self) -> Path:
        if self._build_into is not None:
            return self._build_into / DATABASE
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / DATABASE

    async def open(self) -> None:
        self.store = SqliteInferredStore(self._database())
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [inferred_changes(event) for event in events])

    async def close(self) -> None:
        await self.store.close()


def inferred_projector(context: PluginContext) -> InferredProjector:
    return InferredProjector(context)
