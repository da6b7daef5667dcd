"""The `vector` entry point: embeddings in SQLite under `<data>/readmodels/vector`, rebuildable, or, with
`EVENTLOOM_GRAPH_BACKEND=neo4j`, in a vector index of the graph's Neo4j (rebuilt in place).

The embedder is `EVENTLOOM_EMBEDDER` (default `hash`) at `EVENTLOOM_VECTOR_DIMENSIONS` (default 384).
Changing either makes a new vector space: `eventloom rebuild vector` re-embeds everything into it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eventloom.errors import EventloomError
from eventloom.event import Event
from projectors.doc_projector import InPlaceDocProjector
from projectors.documents import memory_docs
from projectors.plugins import PluginContext
from readmodels.generations import Generations
from readmodels.graph.backends import neo4j_vector_store
from readmodels.vector.embedders import Embedder, load_embedder
from readmodels.vector.neo4j_store import Neo4jVectorStore
from readmodels.vector.sqlite_store import SqliteVectorStore

DATABASE = "vector.sqlite"


class VectorProjector:
    def __init__(self, context: PluginContext) -> None:
        self.name = context.name
        self.embedder: Embedder = load_embedder(context.settings.embedder, context.settings.vector_dimensions)
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._build_into = context.generation
        self.store = SqliteVectorStore(self._database(), self.embedder)

    def _database(self) -> Path:
        if self._build_into is not None:
            return self._build_into / DATABASE
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / DATABASE

    async def open(self) -> None:
        self.store = SqliteVectorStore(self._database(), self.embedder)
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [memory_docs(event) for event in events])

    async def close(self) -> None:
        await self.store.close()


def vector_projector(context: PluginContext) -> VectorProjector | InPlaceDocProjector[Neo4jVectorStore]:
    settings = context.settings
    if settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError("on Neo4j the vector model has no generations: it is rebuilt in place")
        embedder = load_embedder(settings.embedder, settings.vector_dimensions)
        return InPlaceDocProjector(context.name, neo4j_vector_store(settings, embedder))
    return VectorProjector(context)
