"""`Neo4jClaimsStore`: the claims read model on Neo4j, in the graph's database.

Nodes are `Observation`, `Claim` (a Resolution is `Claim:Resolution`) and `KnownEntity`, each unique by
`key`; relationships are the pack's own (`SUBJECT`, `BASIS`, `SUPERSEDES`, `CONTRADICTS`) and, between
entities, a triple's predicate as the relationship type. A batch's operations (`neo4j_writes`) and its
checkpoints (`ClaimsCheckpoint` nodes, one per (projector, session)) are one managed transaction, which the
driver retries on transient errors; inside it, events at or below their session's checkpoint are skipped,
and on any error nothing of the batch is written. The schema (`neo4j_schema`) is applied at `open()`;
`clear()` deletes the pack's labels only, never the graph's or another model's nodes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import neo4j
from neo4j import AsyncDriver, AsyncManagedTransaction

from eventloom.settings import Settings
from gateway.packs.claims.model import NODE_LABELS, ClaimsChanges
from gateway.packs.claims.neo4j_plan import check_operations
from gateway.packs.claims.neo4j_reads import Neo4jClaimsReads
from gateway.packs.claims.neo4j_schema import CHECKPOINT, claims_schema_plan
from gateway.packs.claims.neo4j_writes import write_operations
from readmodels.graph.cypher.io import Row
from readmodels.graph.protocol import GraphStoreError
from readmodels.neo4j.driver import auto_commit, connect, fetch, unavailable_as_error

DEFAULT_DATABASE: Final = "neo4j"
DELETE_BATCH: Final = 5_000
_CHECKPOINTS: Final = (
    f"UNWIND $keys AS k MATCH (c:{CHECKPOINT} {{key: k}}) RETURN c.session AS session, c.seq AS seq"
)
_SAVE_CHECKPOINTS: Final = (
    f"UNWIND $rows AS r MERGE (c:{CHECKPOINT} {{key: r.key}}) "
    "SET c.projector = r.projector, c.session = r.session, c.seq = r.seq, c.eventHash = r.eventHash"
)
_MODEL_NODES: Final = "|".join(NODE_LABELS)


def checkpoint_key(projector: str, session: str) -> str:
    """One checkpoint per (projector, session), whatever characters either holds."""
    return json.dumps([projector, session], separators=(",", ":"))


async def _checkpoints(
    tx: AsyncManagedTransaction, projector: str, sessions: Sequence[str]
) -> dict[str, int]:
    keys = [checkpoint_key(projector, session) for session in dict.fromkeys(sessions)]
    return {str(row["session"]): int(row["seq"]) for row in await fetch(tx, _CHECKPOINTS, {"keys": keys})}


async def _apply_in(tx: AsyncManagedTransaction, projector: str, batch: list[ClaimsChanges]) -> int:
    """The whole batch inside one transaction (the driver may run this again after a transient error)."""
    applied = await _checkpoints(tx, projector, [item.session for item in batch])
    todo: list[ClaimsChanges] = []
    for item in batch:
        if item.seq > applied.get(item.session, 0):
            applied[item.session] = item.seq
            todo.append(item)
    if not todo:
        return 0
    await write_operations(tx, [op for item in todo for op in item.operations])
    last = {item.session: item for item in todo}
    rows: list[Row] = [
        {
            "key": checkpoint_key(projector, session),
            "projector": projector,
            "session": session,
            "seq": item.seq,
            "eventHash": item.event_hash,
        }
        for session, item in last.items()
    ]
    await fetch(tx, _SAVE_CHECKPOINTS, {"rows": rows})
    return len(todo)


class Neo4jClaimsStore(Neo4jClaimsReads):
    """`TrackingRecorder[ClaimsChanges]` and `ClaimsReads` on the Neo4j database `database` at `uri`."""

    def __init__(
        self,
        uri: str,
        *,
        user: str,
        password: str,
        database: str | None = None,
        connection_timeout_s: float = 5.0,
        retry_time_s: float = 15.0,
    ) -> None:
        super().__init__(self._rows)
        self.uri = uri
        self.database = database or DEFAULT_DATABASE
        self._auth = (user, password)
        self._timeouts = (connection_timeout_s, retry_time_s)
        self._driver: AsyncDriver | None = None
        self.migrations_applied: list[str] = []
        """The claims migrations the last `open` applied (none when the schema was up to date)."""

    async def open(self) -> None:
        if self._driver is not None:
            return
        connection_timeout_s, retry_time_s = self._timeouts
        self._driver, self.migrations_applied = await connect(
            self.uri,
            self._auth,
            self.database,
            claims_schema_plan(),
            connection_timeout_s=connection_timeout_s,
            retry_time_s=retry_time_s,
        )

    async def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    async def __aenter__(self) -> Neo4jClaimsStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _opened(self) -> AsyncDriver:
        if self._driver is None:
            raise GraphStoreError(f"the claims store on {self.uri} is not open")
        return self._driver

    def _session(self, mode: str) -> neo4j.AsyncSession:
        return self._opened().session(database=self.database, default_access_mode=mode)

    async def _rows(self, cypher: str, params: dict[str, Any]) -> list[Row]:
        """The rows of one read statement, in a read transaction."""

        async def work(tx: AsyncManagedTransaction) -> list[Row]:
            return await fetch(tx, cypher, params)

        async with self._session(neo4j.READ_ACCESS) as session:
            return await unavailable_as_error(session.execute_read(work), self.uri)

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        async def work(tx: AsyncManagedTransaction) -> dict[str, int]:
            return await _checkpoints(tx, projector, sessions)

        async with self._session(neo4j.READ_ACCESS) as session:
            return await unavailable_as_error(session.execute_read(work), self.uri)

    async def apply(self, projector: str, batch: Sequence[ClaimsChanges]) -> int:
        """Raises `neo4j_plan.InvalidOperation` (before anything runs) for a relation Cypher cannot hold."""
        if not batch:
            return 0
        items = list(batch)
        check_operations(op for item in items for op in item.operations)
        async with self._session(neo4j.WRITE_ACCESS) as session:
            return await unavailable_as_error(session.execute_write(_apply_in, projector, items), self.uri)

    async def clear(self) -> None:
        """Delete everything the claims model holds, checkpoints first (before a rebuild in place).

        Checkpoints first: a clear cut short then leaves nodes that replaying merges into, never checkpoints
        that would make the replay skip what was already deleted. In batches, each its own transaction."""
        execute = auto_commit(self._opened(), self.database)
        await unavailable_as_error(
            execute(
                f"MATCH (c:{CHECKPOINT}) CALL (c) {{ DELETE c }} IN TRANSACTIONS OF {DELETE_BATCH} ROWS", {}
            ),
            self.uri,
        )
        await unavailable_as_error(
            execute(
                f"MATCH (n:{_MODEL_NODES}) "
                f"CALL (n) {{ DETACH DELETE n }} IN TRANSACTIONS OF {DELETE_BATCH} ROWS",
                {},
            ),
            self.uri,
        )


def neo4j_claims_store(settings: Settings) -> Neo4jClaimsStore:
    """A (not yet opened) claims store on the Neo4j server the settings name."""
    if not settings.neo4j_uri:
        raise ValueError("neo4j_uri: not set (NEO4J_URI)")
    return Neo4jClaimsStore(
        settings.neo4j_uri,
        user=settings.neo4j_user,
        password=settings.neo4j_password,
        database=settings.neo4j_database,
    )
