"""`Neo4jGraphStore`: the temporal memory graph on a Neo4j 5 server, through the async driver.

One batch is one managed write transaction: the checkpoints are read, the touched versions and open edges
are loaded, the batch is resolved (`versioning.Resolver`, shared with LadybugDB) and its `WriteStep`s run
as `UNWIND $rows AS r ...`, the checkpoints last; it commits whole or not at all. The driver retries a
transaction that failed transiently (deadlock, leader switch, connection reset) with backoff; when Neo4j
stays unreachable the store raises `ReadModelUnavailableError`, and the projector runtime pauses without
acknowledging or dead-lettering anything. Nothing is cached between batches: several workers (partitions)
may write the same database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

import neo4j
from neo4j import AsyncDriver, AsyncManagedTransaction
from neo4j.exceptions import ClientError

from readmodels.graph import equivalence, reads
from readmodels.graph.cypher.guard import single_read_statement
from readmodels.graph.cypher.io import Reading, Row, run_async
from readmodels.graph.cypher.read_plan import refuse_neo4j_plan
from readmodels.graph.migrations import outdated_graph
from readmodels.graph.model import EventProjection
from readmodels.graph.protocol import GraphQueryError, GraphStoreError, ReadOnlyQueryError
from readmodels.graph.records import (
    EntityVersion,
    EventRecord,
    Neighbour,
    ObservationRecord,
    RelationEdge,
    SourceCitationRecord,
)
from readmodels.graph.snapshot import load_open_edges, load_snapshot, read_checkpoints
from readmodels.graph.versioning import Resolver, load_request
from readmodels.graph.writes import WriteStep, write_steps
from readmodels.neo4j.driver import (
    GRAPH_LABELS,
    RETRY_TIME_S,
    auto_commit,
    connect,
    fetch,
    in_one_transaction,
    unavailable_as_error,
)
from readmodels.neo4j.schema import DEFAULT_VECTOR_DIMENSIONS, apply_migrations, schema_plan

T = TypeVar("T")
ROWS_PER_STATEMENT: Final = 10_000
"""Rows bound to one `UNWIND`: large enough to amortize a round trip, small enough for the heap."""
_ACCESS_MODE = "Neo.ClientError.Statement.AccessMode"


async def _run_step(tx: AsyncManagedTransaction, step: WriteStep) -> None:
    columns = tuple(step.types)
    for start in range(0, len(step.rows), ROWS_PER_STATEMENT):
        rows = [
            {name: row.get(name) for name in columns} for row in step.rows[start : start + ROWS_PER_STATEMENT]
        ]
        result = await tx.run(f"UNWIND $rows AS r {step.statement}", {"rows": rows})
        await result.consume()


async def _apply_in(tx: AsyncManagedTransaction, projector: str, projections: list[EventProjection]) -> int:
    """The whole batch inside one transaction (the driver may run this again after a transient error)."""

    async def execute(cypher: str, params: dict[str, Any]) -> list[Row]:
        return await fetch(tx, cypher, params)

    sessions = list(dict.fromkeys(p.event.session for p in projections))
    applied = await run_async(read_checkpoints(projector, sessions), execute)
    todo: list[EventProjection] = []
    for projection in projections:
        event = projection.event
        if event.seq > applied.get(event.session, 0):
            applied[event.session] = event.seq
            todo.append(projection)
    if not todo:
        return 0
    snapshot = await run_async(load_snapshot(load_request(todo)), execute)
    probe = Resolver(snapshot)  # a first pass names the stored edges the batch needs
    probe.resolve(todo)
    snapshot.open_edges = await run_async(load_open_edges(probe.demands), execute)
    plan = Resolver(snapshot).resolve(todo)
    for step in write_steps(plan, projector):
        await _run_step(tx, step)
    return len(todo)


class Neo4jGraphStore:
    """`GraphStore` on the Neo4j database `database` at `uri` (Bolt or neo4j scheme)."""

    def __init__(
        self,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        vector_dimensions: int = DEFAULT_VECTOR_DIMENSIONS,
        connection_timeout_s: float = 5.0,
        retry_time_s: float = RETRY_TIME_S,
    ) -> None:
        self.uri = uri
        self.database = database
        self._auth = (user, password)
        self._plan = schema_plan(vector_dimensions)
        self._connection_timeout_s = connection_timeout_s
        self._retry_time_s = retry_time_s
        self._driver: AsyncDriver | None = None
        self._model_checked = False  # whether the graph was found built by this projection (`apply`)
        self.migrations_applied: list[str] = []
        """The migrations the last `open` applied (none when the schema was up to date)."""

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._driver is not None:
            return
        self._driver, self.migrations_applied = await connect(
            self.uri,
            self._auth,
            self.database,
            self._plan,
            connection_timeout_s=self._connection_timeout_s,
            retry_time_s=self._retry_time_s,
        )

    async def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def __aenter__(self) -> Neo4jGraphStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def clear(self) -> None:
        """Delete every node and relationship of the graph (before a rebuild), keeping the schema's
        `Migration` records and every other read model in this database (only `GRAPH_LABELS` are deleted).

        In batches, each its own transaction: a large graph does not fit one transaction's memory.
        """
        if self._driver is None:
            raise GraphStoreError("the graph store is not open")
        await unavailable_as_error(
            auto_commit(self._driver, self.database)(
                f"MATCH (n:{GRAPH_LABELS}) CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF 5000 ROWS",
                {},
            ),
            self.uri,
        )

    async def run_auto_commit(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """One statement in an implicit transaction: schema changes, `CALL ... IN TRANSACTIONS`."""
        if self._driver is None:
            raise GraphStoreError("the graph store is not open")
        execute = auto_commit(self._driver, self.database)
        return await unavailable_as_error(execute(cypher, dict(params or {})), self.uri)

    async def migrate(self) -> list[str]:
        """Apply the migrations missing from the database (and wait for their indexes); their names."""
        if self._driver is None:
            raise GraphStoreError("the graph store is not open")
        execute = auto_commit(self._driver, self.database)
        together = in_one_transaction(self._driver, self.database)
        return await unavailable_as_error(apply_migrations(execute, together, self._plan), self.uri)

    def _session(self, mode: str) -> neo4j.AsyncSession:
        if self._driver is None:
            raise GraphStoreError("the graph store is not open")
        return self._driver.session(database=self.database, default_access_mode=mode)

    # -- writes ------------------------------------------------------------------------------------------

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._read(read_checkpoints(projector, list(dict.fromkeys(sessions))))

    async def apply(self, projector: str, projections: Sequence[EventProjection]) -> int:
        if not projections:
            return 0
        if not self._model_checked:
            if await self.run_write("MATCH (:Entity)-[r:RELATES]->() RETURN r.uid AS uid LIMIT 1", {}):
                raise outdated_graph(f"the graph in Neo4j {self.uri} (database {self.database})")
            self._model_checked = True  # nothing writes an edge between versions any more
        batch = list(projections)
        async with self._session(neo4j.WRITE_ACCESS) as session:
            return await unavailable_as_error(session.execute_write(_apply_in, projector, batch), self.uri)

    async def run_write(self, cypher: str, params: Mapping[str, Any]) -> list[Row]:
        """One statement in its own write transaction (bulk loads, maintenance; not part of `GraphStore`)."""

        async def work(tx: AsyncManagedTransaction) -> list[Row]:
            return await fetch(tx, cypher, params)

        async with self._session(neo4j.WRITE_ACCESS) as session:
            return await unavailable_as_error(session.execute_write(work), self.uri)

    # -- reads -------------------------------------------------------------------------------------------

    async def _read(self, reading: Reading[T]) -> T:
        async def work(tx: AsyncManagedTransaction) -> T:
            return await run_async(reading, lambda cypher, params: fetch(tx, cypher, params))

        async with self._session(neo4j.READ_ACCESS) as session:
            return await unavailable_as_error(session.execute_read(work), self.uri)

    async def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        statement = single_read_statement(cypher)

        async def work(tx: AsyncManagedTransaction) -> list[Row]:
            planned = await tx.run(f"EXPLAIN {statement}", dict(params or {}))
            refuse_neo4j_plan((await planned.consume()).plan)
            return await fetch(tx, statement, params)

        try:
            async with self._session(neo4j.READ_ACCESS) as session:
                return await unavailable_as_error(session.execute_read(work), self.uri)
        except ClientError as exc:
            if exc.code == _ACCESS_MODE:
                raise ReadOnlyQueryError(f"graph queries are read-only; refused: {exc.message}") from None
            raise GraphQueryError(f"{exc.code}: {exc.message}") from None

    async def read(self, reading: Reading[T]) -> T:
        return await self._read(reading)

    async def events(self, session: str, *, from_seq: int = 1, limit: int | None = None) -> list[EventRecord]:
        return await self._read(reads.events(session, from_seq, limit))

    async def entity_versions(self, session: str, name: str, entity_type: str) -> list[EntityVersion]:
        return await self._read(reads.entity_versions(session, name, entity_type))

    async def entities(
        self, session: str, *, as_of: str | None = None, entity_type: str | None = None
    ) -> list[EntityVersion]:
        return await self._read(reads.entities(session, as_of, entity_type))

    async def relations(
        self,
        session: str,
        *,
        as_of: str | None = None,
        include_inferred: bool = True,
        relation_type: str | None = None,
    ) -> list[RelationEdge]:
        return await self._read(reads.relations(session, as_of, include_inferred, relation_type))

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
        return await self._read(
            equivalence.neighbours(session, name, entity_type, depth, as_of, include_inferred)
        )

    async def sources(self, session: str, *, path: str | None = None) -> list[SourceCitationRecord]:
        return await self._read(reads.sources(session, path))

    async def observations(self, session: str, task_id: str) -> list[ObservationRecord]:
        return await self._read(reads.observations(session, task_id, "type"))
