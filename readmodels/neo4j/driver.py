"""What every read model on Neo4j shares: connecting (and migrating), running Cypher, mapping outages.

The graph, keyword and vector read models live in one Neo4j database with one schema (`neo4j_schema`),
so whichever store opens first applies the missing migrations. A store that finds Neo4j unreachable (after
the driver's own retries) raises `ReadModelUnavailableError`: the projector runtime pauses on it instead of
dead-lettering events that are fine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, Final, TypeVar

from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import AuthError, Neo4jError, ServiceUnavailable, SessionExpired, TransientError

from eventloom.errors import ReadModelUnavailableError
from readmodels.graph.cypher.io import ExecuteAsync, Row
from readmodels.graph.protocol import GraphStoreError, PlannedMigration
from readmodels.neo4j.schema import RunTogether, apply_migrations

T = TypeVar("T")
UNREACHABLE: Final = (ServiceUnavailable, SessionExpired, TransientError, OSError)
RETRY_TIME_S: Final = 5.0
"""How long the driver retries a failed transaction (a deadlock, a reset connection, a server that is
gone) before the store raises `ReadModelUnavailableError`. Long enough for a transient error; beyond it the
projector shows as failing and retries itself, backing off, so a longer ride-out would only hide an outage."""
GRAPH_LABELS: Final = "Session|Event|Entity|EntityKey|Source|Checkpoint"
"""The graph's own nodes. Clearing or bulk-loading the graph touches only these: the database also holds
`Migration` records, the keyword and vector models and whatever read models plug-ins keep there (the
workflow pack's, for one), which the core cannot name."""


async def fetch(tx: AsyncManagedTransaction, cypher: str, params: Mapping[str, Any] | None) -> list[Row]:
    """Every row of one statement inside a managed transaction."""
    result = await tx.run(cypher, dict(params or {}))
    return [record.data() async for record in result]


async def unavailable_as_error(call: Awaitable[T], uri: str) -> T:
    """Await `call`; Neo4j being unreachable (after the driver's own retries) becomes
    `ReadModelUnavailableError`, so callers pause instead of treating the batch as bad."""
    try:
        return await call
    except AuthError as exc:
        raise GraphStoreError(f"Neo4j at {uri} refused the credentials: {exc.message}") from None
    except UNREACHABLE as exc:
        raise ReadModelUnavailableError(f"Neo4j at {uri} is unavailable: {exc}") from exc
    except Neo4jError as exc:
        if exc.is_retryable():
            raise ReadModelUnavailableError(f"Neo4j at {uri}: {exc.code}: {exc.message}") from exc
        raise


def auto_commit(driver: AsyncDriver, database: str) -> ExecuteAsync:
    """Each statement in its own implicit transaction: what schema changes and `CALL ... IN TRANSACTIONS`
    require (neither may run inside a managed transaction)."""

    async def execute(cypher: str, params: dict[str, Any]) -> list[Row]:
        async with driver.session(database=database) as session:
            result = await session.run(cypher, params)
            return [record.data() async for record in result]

    return execute


def in_one_transaction(driver: AsyncDriver, database: str) -> RunTogether:
    """Schema statements in one explicit transaction: all of them or none."""

    async def run(statements: Sequence[str]) -> None:
        async with driver.session(database=database) as session, await session.begin_transaction() as tx:
            for statement in statements:
                await (await tx.run(statement)).consume()
            await tx.commit()

    return run


async def connect(
    uri: str,
    auth: tuple[str, str],
    database: str,
    plan: list[PlannedMigration],
    *,
    connection_timeout_s: float,
    retry_time_s: float,
) -> tuple[AsyncDriver, list[str]]:
    """A driver that answered, on a database migrated to `plan`, and the migrations this call applied."""
    driver = AsyncGraphDatabase.driver(
        uri,
        auth=auth,
        connection_timeout=connection_timeout_s,
        max_transaction_retry_time=retry_time_s,
        notifications_min_severity="OFF",
    )
    try:
        await unavailable_as_error(driver.verify_connectivity(), uri)
        applied = await unavailable_as_error(
            apply_migrations(auto_commit(driver, database), in_one_transaction(driver, database), plan), uri
        )
    except BaseException:
        await driver.close()
        raise
    return driver, applied
