"""The backends a deployment uses, from its settings (`EVENTLOOM_GRAPH_BACKEND`, `NEO4J_*`).

With `EVENTLOOM_GRAPH_BACKEND=neo4j` the graph, keyword and vector read models all live in that Neo4j
database, under one schema (`readmodels.neo4j.schema`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.settings import Settings
from readmodels.vector.embedders import Embedder, vector_width

if TYPE_CHECKING:  # the driver is imported by the first Neo4j store made: ~45 MB a process without it
    from readmodels.neo4j.graph_store import Neo4jGraphStore
    from readmodels.neo4j.keyword_store import Neo4jKeywordStore
    from readmodels.neo4j.vector_store import Neo4jVectorStore


def _uri(settings: Settings) -> str:
    if not settings.neo4j_uri:
        raise ValueError("neo4j_uri: not set (NEO4J_URI)")
    return settings.neo4j_uri


def neo4j_store(settings: Settings) -> Neo4jGraphStore:
    """A (not yet opened) graph store on the Neo4j server the settings name."""
    from readmodels.neo4j.graph_store import Neo4jGraphStore  # noqa: PLC0415

    return Neo4jGraphStore(
        _uri(settings),
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
        vector_dimensions=vector_width(settings),
    )


def neo4j_keyword_store(settings: Settings) -> Neo4jKeywordStore:
    """A (not yet opened) keyword store on the Neo4j server the settings name."""
    from readmodels.neo4j.keyword_store import Neo4jKeywordStore  # noqa: PLC0415

    return Neo4jKeywordStore(
        _uri(settings),
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
        vector_dimensions=vector_width(settings),
    )


def neo4j_vector_store(settings: Settings, embedder: Embedder) -> Neo4jVectorStore:
    """A (not yet opened) store of `embedder`'s vectors on the Neo4j server the settings name."""
    from readmodels.neo4j.vector_store import Neo4jVectorStore  # noqa: PLC0415

    return Neo4jVectorStore(
        _uri(settings),
        embedder,
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
        vector_dimensions=vector_width(settings),
    )
