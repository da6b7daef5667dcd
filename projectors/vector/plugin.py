"""The `vector` entry point: embeddings in SQLite under `<data>/readmodels/vector`, rebuildable, or, with
`EVENTLOOM_GRAPH_BACKEND=neo4j`, in a vector index of the graph's Neo4j (rebuilt in place).

The embedder is `EVENTLOOM_EMBEDDER` (default `wordllama`) at `EVENTLOOM_VECTOR_DIMENSIONS` (default: its
own width).
Changing either makes a new vector space: `eventloom rebuild vector` re-embeds everything into it.
"""

from __future__ import annotations

from eventloom.errors import EventloomError
from projectors.doc_projector import InPlaceDocProjector
from projectors.generational import GenerationalProjector
from projectors.memory_docs import memory_docs
from projectors.plugins import PluginContext
from readmodels.backends import neo4j_vector_store
from readmodels.documents import EventDocs
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.neo4j.vector_store import Neo4jVectorStore
from readmodels.vector.embedders import configured_embedder

DATABASE = "vector.sqlite"


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
        context, DATABASE, lambda path: SqliteVectorStore(path, embedder), memory_docs
    )
