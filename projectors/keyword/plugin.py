"""The `keyword` entry point: BM25 search in SQLite FTS5 under `<data>/readmodels/keyword`, rebuildable,
or, with `EVENTLOOM_GRAPH_BACKEND=neo4j`, in a full-text index of the graph's Neo4j (rebuilt in place)."""

from __future__ import annotations

from eventloom.errors import EventloomError
from projectors.doc_projector import InPlaceDocProjector
from projectors.generational import GenerationalProjector
from projectors.memory_docs import memory_docs
from projectors.plugins import PluginContext
from readmodels.backends import neo4j_keyword_store
from readmodels.documents import EventDocs
from readmodels.embedded.keyword_store import SqliteKeywordStore
from readmodels.neo4j.keyword_store import Neo4jKeywordStore

DATABASE = "keyword.sqlite"


def keyword_projector(
    context: PluginContext,
) -> GenerationalProjector[SqliteKeywordStore, EventDocs] | InPlaceDocProjector[Neo4jKeywordStore]:
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError("on Neo4j the keyword model has no generations: it is rebuilt in place")
        return InPlaceDocProjector(
            context.name, neo4j_keyword_store(context.settings), skipped_sessions=context.memory_skips
        )
    return GenerationalProjector(context, DATABASE, SqliteKeywordStore, memory_docs)
