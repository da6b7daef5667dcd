"""The built-in read models' entry points: which store, on which backend, each projector gets.

The only module of `projectors` that knows both backends. With `EVENTLOOM_GRAPH_BACKEND=ladybug` (the
default) the graph is LadybugDB and the keyword, vector and inferred models are SQLite, one file per
generation under `<data>/readmodels/<name>/`: `eventloom rebuild <name>` builds the next generation and
swaps it in. With `neo4j`, the graph, keyword and vector models live in the Neo4j of `NEO4J_URI` and are
rebuilt in place; the inferred-edge model stays embedded. The vector model's embedder is
`EVENTLOOM_EMBEDDER` at `EVENTLOOM_VECTOR_DIMENSIONS`: changing either makes a new vector space, which
`eventloom rebuild vector` re-embeds everything into.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from eventloom.errors import EventloomError
from projectors.doc_projector import InPlaceDocProjector
from projectors.generational import GenerationalProjector
from projectors.generations import Generations
from projectors.graph.projector import GraphProjector
from projectors.inferred.extract import inferred_changes
from projectors.memory_docs import memory_docs
from projectors.plugins import PluginContext
from readmodels.backends import neo4j_keyword_store, neo4j_store, neo4j_vector_store
from readmodels.documents import EventDocs
from readmodels.embedded.graph_bulk import LadybugBulkLoader
from readmodels.embedded.graph_store import LadybugGraphStore, ladybug_buffer_pool
from readmodels.embedded.inferred_store import SqliteInferredStore
from readmodels.embedded.keyword_store import SqliteKeywordStore
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.inferred.model import EventChanges
from readmodels.vector.embedders import configured_embedder

if TYPE_CHECKING:  # imported with the driver only when a Neo4j store is made (readmodels.backends)
    from readmodels.neo4j.graph_store import Neo4jGraphStore
    from readmodels.neo4j.keyword_store import Neo4jKeywordStore
    from readmodels.neo4j.vector_store import Neo4jVectorStore

GRAPH_DATABASE: Final = "graph.lbug"
KEYWORD_DATABASE: Final = "keyword.sqlite"
VECTOR_DATABASE: Final = "vector.sqlite"
INFERRED_DATABASE: Final = "inferred.sqlite"


class EmbeddedGraphProjector(GraphProjector[LadybugGraphStore]):
    """A `GraphProjector` on the live generation; it follows `current` when a rebuild swaps one in."""

    def __init__(self, context: PluginContext) -> None:
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._buffer_pool_size = ladybug_buffer_pool(context.settings)
        super().__init__(
            LadybugGraphStore(self._database(), buffer_pool_size=self._buffer_pool_size),
            name=context.name,
            skipped_sessions=context.memory_skips,
        )

    def _database(self) -> Path:
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / GRAPH_DATABASE

    async def open(self) -> None:
        self.store = LadybugGraphStore(self._database(), buffer_pool_size=self._buffer_pool_size)
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
            LadybugBulkLoader(context.generation / GRAPH_DATABASE),
            name=context.name,
            skipped_sessions=context.memory_skips,
        )
    return EmbeddedGraphProjector(context)


def keyword_projector(
    context: PluginContext,
) -> GenerationalProjector[SqliteKeywordStore, EventDocs] | InPlaceDocProjector[Neo4jKeywordStore]:
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError("on Neo4j the keyword model has no generations: it is rebuilt in place")
        return InPlaceDocProjector(
            context.name, neo4j_keyword_store(context.settings), skipped_sessions=context.memory_skips
        )
    return GenerationalProjector(context, KEYWORD_DATABASE, SqliteKeywordStore, memory_docs)


def vector_projector(
    context: PluginContext,
) -> GenerationalProjector[SqliteVectorStore, EventDocs] | InPlaceDocProjector[Neo4jVectorStore]:
    settings = context.settings
    embedder = configured_embedder(settings)
    if settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError("on Neo4j the vector model has no generations: it is rebuilt in place")
        return InPlaceDocProjector(
            context.name, neo4j_vector_store(settings, embedder), skipped_sessions=context.memory_skips
        )
    return GenerationalProjector(
        context, VECTOR_DATABASE, lambda path: SqliteVectorStore(path, embedder), memory_docs
    )


def inferred_projector(context: PluginContext) -> GenerationalProjector[SqliteInferredStore, EventChanges]:
    """Keeps the audit view of every inferred and causal edge; rebuildable like the keyword model."""
    return GenerationalProjector(context, INFERRED_DATABASE, SqliteInferredStore, inferred_changes)


def live_inferred_database(state_dir: Path) -> Path | None:
    """The live inferred-edge database (what `eventloom memory inferred-status` reads), if there is one."""
    live = Generations(state_dir).live()
    return live / INFERRED_DATABASE if live is not None else None
