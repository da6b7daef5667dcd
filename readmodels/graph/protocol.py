"""The `GraphStore` contract: the temporal memory graph, whatever database holds it.

Backends (`readmodels.embedded.graph_store` on LadybugDB, `readmodels.neo4j.graph_store`) implement this and
pass the shared contract suite (tests/test_graph_contract.py). Writes arrive as `EventProjection`s; their
temporal resolution is done once, backend-neutrally, by `readmodels.graph.versioning`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

import msgspec

from readmodels.graph.cypher.io import Reading
from readmodels.graph.model import EventProjection
from readmodels.graph.records import (
    EntityVersion,
    EventRecord,
    Neighbour,
    ObservationRecord,
    RelationEdge,
    SourceCitationRecord,
)
from readmodels.tracking import TrackingRecorder

T = TypeVar("T")


class GraphStoreError(Exception):
    """Base of the graph read model's own errors."""


class ReadOnlyQueryError(GraphStoreError):
    """`query` was given something other than one read-only statement."""


class GraphQueryError(GraphStoreError):
    """A read query failed (syntax, unknown label, ...)."""


class GraphModelOutdatedError(GraphStoreError):
    """The graph was built by an older projection (relations joined entity versions): rebuild it."""


class MigrationChecksumError(GraphStoreError):
    """An applied migration's recorded checksum differs from the code's: the schema was changed in place."""


class PlannedMigration(msgspec.Struct, frozen=True, kw_only=True):
    """One named schema migration: its statements and their checksum (sha256 of the statements)."""

    name: str
    checksum: str
    statements: tuple[str, ...]

    @property
    def statement_count(self) -> int:
        return len(self.statements)


GraphWriter = TrackingRecorder[EventProjection]
"""What the graph projector needs: checkpoints, and batches of projections written with them exactly once."""


@runtime_checkable
class GraphStore(TrackingRecorder[EventProjection], Protocol):
    """A temporal graph of sessions, events, entity versions, relations, sources and observations.

    Every method is async; a backend whose driver is synchronous runs it in worker threads.
    Timestamps (`as_of`, windows) are RFC 3339; stored ones are UTC with microseconds and `Z`.
    A version or edge is current at `t` when `valid_from <= t < valid_to` (open `valid_to`: still holds);
    `as_of=None` means now, i.e. `valid_to` is null.
    """

    async def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one read-only Cypher statement; `ReadOnlyQueryError` for writes or several statements."""
        ...

    async def read(self, reading: Reading[T]) -> T:
        """Run a backend-neutral typed read (`readmodels.graph.reads`, `readmodels.graph.lookup`)."""
        ...

    async def events(self, session: str, *, from_seq: int = 1, limit: int | None = None) -> list[EventRecord]:
        """The session's spine, in seq order."""
        ...

    async def entity_versions(self, session: str, name: str, entity_type: str) -> list[EntityVersion]:
        """Every version of one entity, oldest first."""
        ...

    async def entities(
        self, session: str, *, as_of: str | None = None, entity_type: str | None = None
    ) -> list[EntityVersion]:
        """The versions current at `as_of` (default: now), ordered by type then name."""
        ...

    async def relations(
        self,
        session: str,
        *,
        as_of: str | None = None,
        include_inferred: bool = True,
        relation_type: str | None = None,
    ) -> list[RelationEdge]:
        """The edges current at `as_of` (default: now), ordered by type, source and target name."""
        ...

    async def neighbours(
        self,
        session: str,
        name: str,
        entity_type: str | None = None,
        *,
        depth: int = 1,
        as_of: str | None = None,
        include_inferred: bool = True,
    ) -> list[Neighbour]:
        """Entities within `depth` hops (either direction) of the named entity, nearest first."""
        ...

    async def sources(self, session: str, *, path: str | None = None) -> list[SourceCitationRecord]:
        """Every citation of a source span in the session (by events and by entity versions)."""
        ...

    async def observations(self, session: str, task_id: str) -> list[ObservationRecord]:
        """Events observed for a task (`OBSERVED_*`, `HAS_CHECKPOINT`), in seq order."""
        ...
