"""The temporal memory graph: write model, `GraphStore` contract, versioning rules and backends."""

from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EntityRef,
    EventProjection,
    GraphOp,
    InvalidGraphWrite,
    Provenance,
    RelationAssertion,
    RelationInvalidation,
    SourceCitation,
    SpineEvent,
    TaskObservation,
)
from readmodels.graph.protocol import (
    GraphModelOutdatedError,
    GraphStore,
    MigrationChecksumError,
    ReadOnlyQueryError,
)

__all__ = [
    "EdgeRetraction",
    "EntityAssertion",
    "EntityInvalidation",
    "EntityRef",
    "EventProjection",
    "GraphModelOutdatedError",
    "GraphOp",
    "GraphStore",
    "InvalidGraphWrite",
    "MigrationChecksumError",
    "Provenance",
    "ReadOnlyQueryError",
    "RelationAssertion",
    "RelationInvalidation",
    "SourceCitation",
    "SpineEvent",
    "TaskObservation",
]
