"""`LadybugGraphStore`: the temporal memory graph embedded in LadybugDB (PyPI `ladybug`).

LadybugDB is synchronous, so the store owns threads: a writer (schema, batches, checkpoints) and readers
(queries and typed reads, `LadybugReaders`), each with its own connection, so the event loop never blocks
and reads see the last committed state while a batch is being written. One batch is one write transaction
holding the projection and the checkpoints: it commits whole or not at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import ladybug

from eventloom.settings import Settings
from eventloom.stages import StageTimes
from readmodels.embedded.graph_schema import apply_migrations, typed_rel_ddl
from readmodels.embedded.graph_writes import write_plan
from readmodels.embedded.ladybug_checkpoints import DEFAULT_POLICY, CheckpointPolicy, Uncheckpointed
from readmodels.embedded.ladybug_io import open_database, rollback, run_rows
from readmodels.embedded.ladybug_readers import DEFAULT_READERS, LadybugReaders
from readmodels.graph import equivalence, reads
from readmodels.graph.cypher.guard import single_read_statement
from readmodels.graph.cypher.io import Reading, run_sync
from readmodels.graph.cypher.read_plan import refuse_ladybug_plan
from readmodels.graph.edge_cache import EdgesNotCached, OpenEdgeCache
from readmodels.graph.model import EventProjection
from readmodels.graph.name_cache import NameCache
from readmodels.graph.plan import Snapshot, WritePlan
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

log = logging.getLogger(__name__)
T = TypeVar("T")
DEFAULT_CHECKPOINT_THRESHOLD = DEFAULT_POLICY.wal_bytes
"""WAL bytes past which a commit folds the WAL into the database file (a checkpoint). Its own default (a
few MiB) makes nearly every batch commit pay for a checkpoint, which costs more than the batch itself.
The stores that decide themselves also count commits and events (`ladybug_checkpoints`)."""
DEFAULT_BUFFER_POOL_SIZE = 0
"""LadybugDB's own default (80 % of the machine's memory). A bound of 1 GiB made writes fail ("the buffer
pool is full") at ~70,000 events of bench/project.py's load, and 2 GiB held at 100,000 but with a resident
size near the bound: the engine keeps more than the data in its pool (primary-key indexes, versions not yet
checkpointed), so a bound must grow with the graph. The node's stores take `ladybug_buffer_pool(settings)`
(`EVENTLOOM_LADYBUG_BUFFER_POOL_MB`): the engine's default also costs ~2 MB resident per GiB of pool."""


def ladybug_buffer_pool(settings: Settings) -> int:
    """The buffer pool of each of the node's LadybugDB databases, in bytes (0: the engine's default)."""
    return settings.ladybug_buffer_pool_mb * 1024 * 1024


_WRITE_REFUSED = "read-only transaction"


class LadybugGraphStore:
    """`GraphStore` on an embedded LadybugDB database at `path` (created on first open)."""

    def __init__(
        self,
        path: str | Path,
        *,
        buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE,
        checkpoints: CheckpointPolicy = DEFAULT_POLICY,
        readers: int = DEFAULT_READERS,
    ) -> None:
        self.path = Path(path)
        self._buffer_pool_size = buffer_pool_size
        self._uncheckpointed = Uncheckpointed(self.path, checkpoints)
        self._db: ladybug.Database | None = None
        self._writer: ladybug.Connection | None = None
        self._readers = LadybugReaders(lambda: self._db, readers)
        self._write_thread: ThreadPoolExecutor | None = None
        self._typed: set[str] = set()
        self.migrations_applied: list[str] = []
        """The migrations the last `open` applied (none when the schema was up to date)."""
        self._open_edges = OpenEdgeCache()  # this store is its database's only writer
        self._names = NameCache()
        self.stages = StageTimes()
        """Where `apply` spends its time (checkpoints, snapshot, open edges, resolve, rows, commit)."""
        self._is_open = False
        self._lifecycle = asyncio.Lock()

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def open(self) -> None:
        async with self._lifecycle:
            if not self._is_open:
                await self._open()
                self._is_open = True

    async def _open(self) -> None:
        self._write_thread = ThreadPoolExecutor(1, thread_name_prefix="ladybug-write")
        self._readers.start()
        try:
            await self._in_writer(self._open_sync)
        except BaseException:
            await self._close()
            raise

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._open_database()
        self.migrations_applied = apply_migrations(self._write)
        self._typed = self._rel_tables()

    async def close(self) -> None:
        async with self._lifecycle:
            if self._is_open:
                self._is_open = False  # refuse new calls; those already queued finish first (FIFO)
                await self._close()

    async def _close(self) -> None:
        await self._readers.close()
        await self._in_writer(self._close_writer)
        if self._write_thread is not None:
            self._write_thread.shutdown(wait=False)  # idle: its last job was awaited
            self._write_thread = None

    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._db is not None:
            self._db.close()
            self._db = None

    async def __aenter__(self) -> LadybugGraphStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- threads -----------------------------------------------------------------------------------------

    async def _ready(self) -> None:
        """Wait out an open or close in progress, then refuse the call unless the store is open."""
        if not self._is_open and self._lifecycle.locked():
            async with self._lifecycle:
                pass
        if not self._is_open:
            raise GraphStoreError("the graph store is not open")

    async def _reading(self, fn: Callable[[], T]) -> T:
        await self._ready()
        return await self._readers.run(fn)  # no await between the check and the submission

    async def _reading_cypher(self, reading: Reading[T]) -> T:
        return await self._reading(lambda: run_sync(reading, self._read))

    async def _writing(self, fn: Callable[[], T]) -> T:
        await self._ready()
        return await self._in_writer(fn)

    async def _in_writer(self, fn: Callable[[], T]) -> T:
        if self._write_thread is None:
            raise GraphStoreError("the graph store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._write_thread, fn)

    def _write(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._writer is None:
            raise GraphStoreError("the graph store is not open")
        return run_rows(self._writer, cypher, params)

    def _read(
        self, cypher: str | ladybug.PreparedStatement, params: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        return run_rows(self._readers.connection(), cypher, params)

    def _plans(self, statement: str, params: Mapping[str, Any] | None) -> list[str]:
        """The `EXPLAIN` text of `statement`: planned, not executed."""
        rows = self._read(self._prepared(f"EXPLAIN {statement}"), params)
        return [str(next(iter(row.values()), "")) for row in rows]

    def _prepared(self, statement: str) -> ladybug.PreparedStatement:
        """`statement` prepared as one statement, the engine's own parse: a second statement is an error
        (a plain string would run every statement in it), and no Python object of the caller's frames can
        be scanned (the driver rewrites `LOAD FROM <name>` in strings to do that)."""
        prepared = ladybug.PreparedStatement(self._readers.connection(), statement)
        if not prepared.is_success():
            message = prepared.get_error_message()
            if "multiple statements" in message:
                raise ReadOnlyQueryError("one statement per query: graph queries are read-only")
            if _WRITE_REFUSED in message:
                raise ReadOnlyQueryError(f"graph queries are read-only; refused: {message}")
            raise GraphQueryError(message)
        return prepared

    def _rel_tables(self) -> set[str]:
        rows = self._write("CALL show_tables() RETURN name, type")
        return {str(row["name"]) for row in rows if row["type"] == "REL"}

    # -- writes ------------------------------------------------------------------------------------------

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(sessions))
        return await self._reading_cypher(read_checkpoints(projector, wanted))

    async def apply(self, projector: str, projections: Sequence[EventProjection]) -> int:
        if not projections:
            return 0
        batch = list(projections)
        return await self._writing(lambda: self._apply_sync(projector, batch))

    def _apply_sync(self, projector: str, projections: list[EventProjection]) -> int:
        timed = self.stages.timed
        self._write("BEGIN TRANSACTION")
        try:
            sessions = list(dict.fromkeys(p.event.session for p in projections))
            with timed("checkpoints"):
                applied = run_sync(read_checkpoints(projector, sessions), self._write)
            todo: list[EventProjection] = []
            for projection in projections:
                event = projection.event
                if event.seq > applied.get(event.session, 0):
                    applied[event.session] = event.seq
                    todo.append(projection)
            if todo:
                with timed("snapshot"):
                    snapshot = self._snapshot(todo)
                plan = self._resolved(snapshot, todo)
                write_plan(self._write, plan, projector, self._ensure_typed, self.stages)
            with timed("commit"):
                self._write("COMMIT")
        except BaseException:
            self._open_edges.clear()  # entries are only ever committed state, but take no chances
            self._names.clear()
            if self._writer is not None:
                rollback(self._writer)
            self._typed = self._rel_tables()  # DDL of the failed batch was rolled back too
            raise
        self._uncheckpointed.committed(len(todo))
        if todo:
            self._open_edges.committed(plan)
            self._names.committed(plan)
        self._checkpoint_if_due(idle=False)
        return len(todo)

    async def idle(self) -> None:
        """Nothing to write: fold what the commits since the last checkpoint hold, if it is more than a
        little (`readmodels.embedded.ladybug_checkpoints`).

        A checkpoint's cost grows with the database (~6 s at 100,000 events of bench/project.py's load), and
        the engine takes it inside the commit that crosses its threshold, holding that batch and every event
        behind it. Taken while the projector is idle, it delays nobody; under a load with no idle moment, a
        commit past the policy's larger bounds still takes it."""
        await self._writing(lambda: self._checkpoint_if_due(idle=True))
        if self._uncheckpointed.reopen_due():
            await self._reopen()

    async def _reopen(self) -> None:
        """Close the database and open it again, reads held meanwhile: the engine's buffer pool gives back
        the pages it cached only when the database is closed (`CheckpointPolicy.reopen_events`)."""
        async with self._lifecycle:
            if not self._is_open:
                return
            async with self._readers.held():  # reads wait, then reconnect
                await self._in_writer(self._reopen_sync)

    def _reopen_sync(self) -> None:
        written = self._uncheckpointed.since_opened
        with self.stages.timed("reopen"):
            self._close_writer()
            self._open_database()
        log.info("%s: reopened after %d events written, to hand back the pages it cached", self.path, written)

    def _open_database(self) -> None:
        self._db = open_database(
            str(self.path),
            buffer_pool_size=self._buffer_pool_size,
            auto_checkpoint=False,  # `_checkpoint_if_due` decides when (see `idle`)
        )
        self._writer = ladybug.Connection(self._db)
        self._uncheckpointed.reopened()

    def _checkpoint_if_due(self, *, idle: bool) -> None:
        if self._uncheckpointed.due(idle=idle):
            with self.stages.timed("checkpoint"):
                self._write("CHECKPOINT")
            self._uncheckpointed.checkpointed()

    def _snapshot(self, todo: list[EventProjection]) -> Snapshot:
        """What the batch touches, read in its transaction; the keys of names this store remembers are not
        read again (see `NameCache`), only the latest versions under them."""
        request = load_request(todo)
        known, request.name_keys = self._names.split(request.name_keys)
        missing = request.name_keys
        named = sorted(set().union(*known.values()))
        request.entity_keys = list(dict.fromkeys([*request.entity_keys, *named]))
        snapshot = run_sync(load_snapshot(request), self._write)
        self._names.remember({name: snapshot.names.get(name, set()) for name in missing})
        snapshot.names.update(known)
        return snapshot

    def _resolved(self, snapshot: Snapshot, todo: list[EventProjection]) -> WritePlan:
        """One pass when every open edge the batch needs is in memory (the usual case for the only writer);
        otherwise a first pass names them, they are read, and a second pass resolves."""
        timed = self.stages.timed
        try:
            with timed("resolve"):
                return Resolver(snapshot, self._open_edges.known).resolve(todo)
        except EdgesNotCached:
            pass
        with timed("resolve"):
            probe = Resolver(snapshot)
            probe.resolve(todo)
        with timed("open_edges"):
            snapshot.open_edges = self._open_edges.load(
                probe.demands, lambda demands: run_sync(load_open_edges(demands), self._write)
            )
        with timed("resolve"):
            return Resolver(snapshot).resolve(todo)

    def _ensure_typed(self, label: str) -> None:
        if label not in self._typed:
            self._write(typed_rel_ddl(label))
            self._typed.add(label)

    # -- reads -------------------------------------------------------------------------------------------

    async def query(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        statement = single_read_statement(cypher)
        return await self._reading(lambda: self._query_sync(statement, params))

    def _query_sync(self, statement: str, params: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        reader = self._readers.connection()
        run_rows(reader, "BEGIN TRANSACTION READ ONLY", None)
        try:
            refuse_ladybug_plan(self._plans(statement, params))
            return self._read(self._prepared(statement), params)
        except RuntimeError as exc:
            if _WRITE_REFUSED in str(exc):
                raise ReadOnlyQueryError(f"graph queries are read-only; refused: {exc}") from None
            raise GraphQueryError(str(exc)) from None
        finally:
            rollback(reader)

    async def read(self, reading: Reading[T]) -> T:
        return await self._reading_cypher(reading)

    async def events(self, session: str, *, from_seq: int = 1, limit: int | None = None) -> list[EventRecord]:
        return await self._reading_cypher(reads.events(session, from_seq, limit))

    async def entity_versions(self, session: str, name: str, entity_type: str) -> list[EntityVersion]:
        return await self._reading_cypher(reads.entity_versions(session, name, entity_type))

    async def entities(
        self, session: str, *, as_of: str | None = None, entity_type: str | None = None
    ) -> list[EntityVersion]:
        return await self._reading_cypher(reads.entities(session, as_of, entity_type))

    async def relations(
        self,
        session: str,
        *,
        as_of: str | None = None,
        include_inferred: bool = True,
        relation_type: str | None = None,
    ) -> list[RelationEdge]:
        return await self._reading_cypher(reads.relations(session, as_of, include_inferred, relation_type))

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
        return await self._reading_cypher(
            equivalence.neighbours(session, name, entity_type, depth, as_of, include_inferred)
        )

    async def sources(self, session: str, *, path: str | None = None) -> list[SourceCitationRecord]:
        return await self._reading_cypher(reads.sources(session, path))

    async def observations(self, session: str, task_id: str) -> list[ObservationRecord]:
        return await self._reading_cypher(reads.observations(session, task_id, "label"))
