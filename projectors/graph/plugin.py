"""The `graph` entry point: the temporal memory graph, in LadybugDB under `<data>/readmodels/graph` or,
with `EVENTLOOM_GRAPH_BACKEND=neo4j`, on the Neo4j server of `NEO4J_URI`."""

from __future__ import annotations

from pathlib import Path

from eventloom.errors import EventloomError
from projectors.generations import Generations
from projectors.graph.projector import GraphProjector
from projectors.plugins import PluginContext
from readmodels.backends import neo4j_store
from readmodels.embedded.graph_bulk import LadybugBulkLoader
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.neo4j.graph_store import Neo4jGraphStore

DATABASE = "graph.lbug"


class EmbeddedGraphProjector(GraphProjector[LadybugGraphStore]):
    """A `GraphProjector` on the live generation; it follows `current` when a rebuild swaps one in."""

    def __init__(self, context: PluginContext) -> None:
        self.generations = Generations(context.state_dir)
        self.generation = 0
        super().__init__(
            LadybugGraphStore(self._database()), name=context.name, skipped_sessions=context.memory_skips
        )

    def _database(self) -> Path:
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / DATABASE

    async def open(self) -> None:
        self.store = LadybugGraphStore(self._database())
        await super().open()


def graph_projector(
    context: PluginContext,
) -> GraphProjector[LadybugGraphStore] | GraphProjector[LadybugBulkLoader] | GraphProjector[Neo4jGraphStore]:
    """The live projector, or, for `eventloom rebuild` (a new, empty generation), a bulk loader of it."""
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError(
                "a Neo4j graph is rebuilt in place: `eventloom rebuild graph --backend neo4j`"
            )
        return GraphProjector(
            neo4j_store(context.settings), name=context.name, skipped_sessions=context.memory_skips
        )
    if context.generation is not None:
        return GraphProjector(
            LadybugBulkLoader(context.generation / DATABASE),
            name=context.name,
            skipped_sessions=context.memory_skips,
        )
    return EmbeddedGraphProjector(context)
