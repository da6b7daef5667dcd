"""The `graph` entry point: the temporal memory graph in LadybugDB under `<data>/readmodels/graph`."""

from __future__ import annotations

from pathlib import Path

from projectors.graph.projector import GraphProjector
from projectors.plugins import PluginContext
from readmodels.generations import Generations
from readmodels.graph.ladybug import LadybugGraphStore

DATABASE = "graph.lbug"


class EmbeddedGraphProjector(GraphProjector):
    """A `GraphProjector` on the live generation (or a given one, for a rebuild)."""

    def __init__(self, context: PluginContext) -> None:
        self.generations = Generations(context.state_dir)
        self._fixed = context.generation
        self.generation = 0
        super().__init__(LadybugGraphStore(self._database()), name=context.name)

    def _database(self) -> Path:
        directory = self._fixed or self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / DATABASE

    async def open(self) -> None:
        self.store = LadybugGraphStore(self._database())  # follows `current` after a swap
        await super().open()


def graph_projector(context: PluginContext) -> EmbeddedGraphProjector:
    return EmbeddedGraphProjector(context)
