"""The graph backend a deployment uses, from its settings (`EVENTLOOM_GRAPH_BACKEND`, `NEO4J_*`)."""

from __future__ import annotations

from eventloom.settings import Settings
from readmodels.graph.neo4j import Neo4jGraphStore


def neo4j_store(settings: Settings) -> Neo4jGraphStore:
    """A (not yet opened) store on the Neo4j server the settings name."""
    if not settings.neo4j_uri:
        raise ValueError("neo4j_uri: not set (NEO4J_URI)")
    return Neo4jGraphStore(
        settings.neo4j_uri,
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
        vector_dimensions=settings.vector_dimensions,
    )
