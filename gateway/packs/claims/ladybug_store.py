"""`LadybugClaimsStore`: the claims read model embedded in LadybugDB (PyPI `ladybug`).

A `TrackingRecorder[ClaimsChanges]` and a `ClaimsReads`. LadybugDB is synchronous, so the store owns one
connection and one thread that runs every statement, so the event loop never blocks. One batch is one
write transaction holding its operations and the checkpoint per (projector, session): it commits whole
or not at all. The schema (ladybug_schema.py) stands for Neo4j's `Resolution` label by `Claim.kind` and
for its relation types by `RELATES.relation`.

A commit folds the write-ahead log into the database file (a checkpoint, whose cost grows with the
database) only past `DEFAULT_CHECKPOINT_THRESHOLD` of log, as the graph store does: at the engine's default
(a few MiB) one batch in three paid for one, more than the batches themselves cost. `idle` folds it sooner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import ladybug

from gateway.packs.claims import ladybug_reads, ladybug_view
from gateway.packs.claims.ladybug_schema import CHECKPOINT_TABLE, schema_plan
from gateway.packs.claims.ladybug_writes import ClaimsWriter
from gateway.packs.claims.model import ClaimsChanges
from gateway.packs.claims.reads import (
    AboutQuestion,
    BasisChain,
    ClaimQuestion,
    ClaimView,
    ContradictionsQuestion,
    ContradictionView,
    EntityQuestion,
    EntityView,
    ObservationsQuestion,
    ObservationView,
)
from readmodels.embedded.graph_schema import apply_migrations
from readmodels.embedded.graph_store import DEFAULT_BUFFER_POOL_SIZE
from readmodels.embedded.ladybug_checkpoints import Uncheckpointed
from readmodels.embedded.ladybug_io import open_database, rollback, run_rows
from readmodels.graph.cypher.io import Execute
from readmodels.graph.protocol import GraphStoreError
from readmodels.view import ViewGraph, ViewRequest

T = TypeVar("T")


class LadybugClaimsStore:
    """The claims read model on an embedded LadybugDB database at `path` (created on first open)."""

    def __init__(self, path: str | Path, *, buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE) -> None:
        self.db_path = Path(path)
        self._uncheckpointed = Uncheckpointed(self.db_path)
        self._buffer_pool_size = buffer_pool_size
        self._db: ladybug.Database | None = None
        self._connection: ladybug.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._lifecycle = asyncio.Lock()
        self.migrations_applied: list[str] = []
        """The migrations the last `open` applied (none when the schema was up to date)."""

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def open(self) -> None:
        async with self._lifecycle:
            if self._thread is not None:
                return
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="ladybug-claims")
            try:
                await self._in_thread(self._open_sync)
            except BaseException:
                await self._in_thread(self._close_sync)
                self._shutdown()
                raise

    def _open_sync(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_database(
            str(self.db_path),
            buffer_pool_size=self._buffer_pool_size,
            auto_checkpoint=False,  # `_checkpoint_if_due` decides when
        )
        self._connection = ladybug.Connection(self._db)
        self.migrations_applied = apply_migrations(self._execute, schema_plan())

    async def close(self) -> None:
        async with self._lifecycle:
            if self._thread is None:
                return
            await self._in_thread(self._close_sync)
            self._shutdown()

    def _close_sync(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._db is not None:
            self._db.close()
            self._db = None

    def _shutdown(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)  # idle: its last job was awaited
            self._thread = None

    async def __aenter__(self) -> LadybugClaimsStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the thread --------------------------------------------------------------------------------------

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        if self._thread is None:
            raise GraphStoreError("the claims store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _execute(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._connection is None:
            raise GraphStoreError("the claims store is not open")
        return run_rows(self._connection, cypher, params)

    async def _read(self, fn: Callable[[Execute], T]) -> T:
        return await self._in_thread(lambda: fn(self._execute))

    # -- the tracking recorder ---------------------------------------------------------------------------

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(sessions))
        return await self._read(lambda execute: _checkpoints(execute, projector, wanted))

    async def apply(self, projector: str, batch: Sequence[ClaimsChanges]) -> int:
        if not batch:
            return 0
        items = list(batch)
        return await self._in_thread(lambda: self._apply_sync(projector, items))

    def _apply_sync(self, projector: str, batch: list[ClaimsChanges]) -> int:
        self._execute("BEGIN TRANSACTION")
        try:
            applied = _checkpoints(self._execute, projector, list(dict.fromkeys(c.session for c in batch)))
            known = set(applied)
            todo: list[ClaimsChanges] = []
            for changes in batch:
                if changes.seq > applied.get(changes.session, 0):  # else at or below the checkpoint
                    applied[changes.session] = changes.seq
                    todo.append(changes)
            ClaimsWriter(self._execute).write([op for changes in todo for op in changes.operations])
            _save_checkpoints(self._execute, projector, {c.session: c for c in todo}, known)
            self._execute("COMMIT")
        except BaseException:
            if self._connection is not None:
                rollback(self._connection)
            raise
        self._uncheckpointed.committed(len(todo))
        self._checkpoint_if_due(idle=False)
        return len(todo)

    async def idle(self) -> None:
        """Nothing to write: fold what the commits since the last checkpoint hold, if it is more than a
        little (`readmodels.embedded.ladybug_checkpoints`)."""
        await self._in_thread(lambda: self._checkpoint_if_due(idle=True))

    def _checkpoint_if_due(self, *, idle: bool) -> None:
        if self._uncheckpointed.due(idle=idle):
            self._execute("CHECKPOINT")
            self._uncheckpointed.checkpointed()

    # -- reads -------------------------------------------------------------------------------------------

    async def about(self, question: AboutQuestion) -> list[ClaimView]:
        return await self._read(lambda execute: ladybug_reads.about(execute, question))

    async def claim(self, question: ClaimQuestion) -> ClaimView | None:
        return await self._read(lambda execute: ladybug_reads.claim(execute, question))

    async def basis(self, question: ClaimQuestion) -> BasisChain | None:
        return await self._read(lambda execute: ladybug_reads.basis(execute, question))

    async def contradictions(self, question: ContradictionsQuestion) -> list[ContradictionView]:
        return await self._read(lambda execute: ladybug_reads.contradictions(execute, question))

    async def entity(self, question: EntityQuestion) -> EntityView | None:
        return await self._read(lambda execute: ladybug_reads.entity(execute, question))

    async def observations(self, question: ObservationsQuestion) -> list[ObservationView]:
        return await self._read(lambda execute: ladybug_reads.observations(execute, question))

    async def view(self, question: ViewRequest) -> ViewGraph:
        return await self._read(lambda execute: ladybug_view.view(execute, question))


def _checkpoints(execute: Execute, projector: str, sessions: list[str]) -> dict[str, int]:
    rows = execute(
        f"MATCH (c:{CHECKPOINT_TABLE}) WHERE c.projector = $projector AND c.session IN $sessions "
        "RETURN c.session AS session, c.seq AS seq",
        {"projector": projector, "sessions": sessions},
    )
    return {str(row["session"]): int(row["seq"]) for row in rows}


def _save_checkpoints(
    execute: Execute, projector: str, last: dict[str, ClaimsChanges], known: set[str]
) -> None:
    """Move each session's checkpoint to `last` of it (`known`: the sessions that have one already)."""
    rows = [
        {
            "id": f"{projector}\x1f{session}",
            "projector": projector,
            "session": session,
            "seq": changes.seq,
            "hash": changes.event_hash,
        }
        for session, changes in last.items()
    ]
    new = [row["id"] for row in rows if row["session"] not in known]
    if new:
        execute(f"UNWIND $ids AS i CREATE (:{CHECKPOINT_TABLE} {{id: i}})", {"ids": new})
    if rows:
        execute(
            f"UNWIND $rows AS r MATCH (c:{CHECKPOINT_TABLE} {{id: r.id}}) SET c.projector = r.projector, "
            "c.session = r.session, c.seq = r.seq, c.event_hash = r.hash",
            {"rows": rows},
        )
