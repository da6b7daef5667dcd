"""`LadybugRecorder`: a plug-in pack's read model on an embedded LadybugDB database, as a `TrackingRecorder`.

LadybugDB is synchronous, so the recorder owns one connection and one thread that runs every statement, and
the event loop never blocks. One batch is one write transaction holding its operations and the checkpoint
per (projector, session) in the pack's checkpoint table: it commits whole or not at all. When the write-ahead
log is folded into the file, and when the database is reopened to hand back its cached pages, follows
`ladybug_checkpoints`, as for the graph.

The database is created by the first batch with something to keep, not by `open`: LadybugDB holds about
3.6 MB resident for each node table however empty (its primary-key index), so a pack's tables cost a node
70-90 MB before any event the pack reads. Until then every read sees an empty database, and the checkpoints
of the events the pack passed over are kept in a small SQLite file beside it (`<database>.checkpoints`, one
transaction a batch, the same table as the SQLite read models'): the runner applies a session's events only
in order, against those checkpoints. The batch that creates the database first copies them into it; the
file is removed once they are there (and copied again at `open` if a crash came between).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Generic, NamedTuple, Protocol, Self, TypeVar

import ladybug

from readmodels.embedded.graph_schema import apply_migrations
from readmodels.embedded.graph_store import DEFAULT_BUFFER_POOL_SIZE
from readmodels.embedded.ladybug_checkpoints import DEFAULT_POLICY, CheckpointPolicy, Uncheckpointed
from readmodels.embedded.ladybug_io import open_database, rollback, run_rows
from readmodels.embedded.sqlite_db import CHECKPOINTS_TABLE, read_checkpoints, save_checkpoints, unapplied
from readmodels.graph.cypher.io import Execute
from readmodels.graph.protocol import GraphStoreError, PlannedMigration
from readmodels.tracking import Applied, past_checkpoints

log = logging.getLogger(__name__)
T = TypeVar("T")
Op = TypeVar("Op")
Op_co = TypeVar("Op_co", covariant=True)
_TABLE_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")


class PackChanges(Applied, Protocol[Op_co]):
    """One event's operations for a pack (none for an event it does not read), with its place in the log."""

    @property
    def operations(self) -> Sequence[Op_co]: ...


class LadybugRecorder(Generic[Op]):
    """Batches of `PackChanges[Op]` into the LadybugDB database at `path`; subclasses add their reads
    through `read`."""

    def __init__(
        self,
        path: str | Path,
        *,
        name: str,
        plan: Sequence[PlannedMigration],
        checkpoint_table: str,
        write: Callable[[Execute, list[Op]], None],
        buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE,
        checkpoints: CheckpointPolicy = DEFAULT_POLICY,
    ) -> None:
        if not _TABLE_NAME.match(checkpoint_table):
            raise ValueError(
                f"checkpoint_table: a node table name like PackCheckpoint, got {checkpoint_table!r}"
            )
        self.db_path = Path(path)
        self.early_checkpoints = self.db_path.with_name(self.db_path.name + ".checkpoints")
        """Where the checkpoints of the events passed over before the database exists are kept."""
        self.name = name
        self._plan = list(plan)
        self._checkpoint_table = checkpoint_table
        self._write = write
        self._buffer_pool_size = buffer_pool_size
        self._uncheckpointed = Uncheckpointed(self.db_path, checkpoints)
        self._db: ladybug.Database | None = None
        self._connection: ladybug.Connection | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._lifecycle = asyncio.Lock()
        self.migrations_applied: list[str] = []
        """The migrations the last opening or creation applied (none when the schema was up to date)."""
        self.opens = 0
        """How often this store opened its database: at `open` or creation, and again after much was
        written (`CheckpointPolicy.reopen_events`)."""

    # -- lifecycle ---------------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the database if it exists (migrating what is missing); else wait for a first write."""
        async with self._lifecycle:
            if self._thread is not None:
                return
            self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"ladybug-{self.name}")
            try:
                await self._in_thread(self._open_if_there)
            except BaseException:
                await self._in_thread(self._close_sync)
                self._shutdown()
                raise

    @property
    def created(self) -> bool:
        """Whether the database is open (it existed, or a batch with something to keep created it)."""
        return self._connection is not None

    def _open_if_there(self) -> None:
        self.migrations_applied = []
        if self.db_path.exists():
            self._open_sync()
            self._adopt_early_checkpoints()  # a crash may have come between the copy and the removal

    def _open_sync(self) -> None:
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_database(
            str(self.db_path),
            buffer_pool_size=self._buffer_pool_size,
            auto_checkpoint=False,  # `_checkpoint_if_due` decides when
        )
        self._connection = ladybug.Connection(self._db)
        self._uncheckpointed.reopened()
        self.opens += 1
        self.migrations_applied = apply_migrations(self._execute, self._plan)

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

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the thread --------------------------------------------------------------------------------------

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        if self._thread is None:
            raise GraphStoreError(f"the {self.name} store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    def _execute(self, cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        if self._connection is None:
            raise GraphStoreError(f"the {self.name} store is not open")
        return run_rows(self._connection, cypher, params)

    async def read(self, fn: Callable[[Execute], T]) -> T:
        """`fn` run on the store's thread with its statements' rows (none before the database exists)."""
        return await self._in_thread(lambda: fn(self._execute if self.created else _no_rows))

    # -- the tracking recorder ---------------------------------------------------------------------------

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        wanted = list(dict.fromkeys(sessions))
        return await self._in_thread(lambda: self._applied_sync(projector, wanted))

    def _applied_sync(self, projector: str, sessions: list[str]) -> dict[str, int]:
        if self.created:
            return self._checkpoints(self._execute, projector, sessions)
        if not self.early_checkpoints.exists():
            return {}
        with _early(self.early_checkpoints) as early:
            return read_checkpoints(early, projector, sessions)

    async def apply(self, projector: str, batch: Sequence[PackChanges[Op]]) -> int:
        if not batch:
            return 0
        items = list(batch)
        return await self._in_thread(lambda: self._apply_sync(projector, items))

    def _apply_sync(self, projector: str, batch: list[PackChanges[Op]]) -> int:
        if not self.created:
            if not any(changes.operations for changes in batch):
                return self._pass_over(projector, batch)
            self._open_sync()
            self._adopt_early_checkpoints()
        self._execute("BEGIN TRANSACTION")
        try:
            sessions = list(dict.fromkeys(c.session for c in batch))
            applied = self._checkpoints(self._execute, projector, sessions)
            known = set(applied)
            todo = past_checkpoints(applied, batch)
            self._write(self._execute, [op for changes in todo for op in changes.operations])
            self._save_checkpoints(projector, {c.session: c for c in todo}, known)
            self._execute("COMMIT")
        except BaseException:
            if self._connection is not None:
                rollback(self._connection)
            raise
        self._uncheckpointed.committed(len(todo))
        self._checkpoint_if_due(idle=False)
        return len(todo)

    def _pass_over(self, projector: str, batch: list[PackChanges[Op]]) -> int:
        """A batch with nothing to keep, before the database exists: only its checkpoints, in the file."""
        self.early_checkpoints.parent.mkdir(parents=True, exist_ok=True)
        with _early(self.early_checkpoints) as early:
            early.execute(CHECKPOINTS_TABLE)
            early.execute("BEGIN IMMEDIATE")
            try:
                todo = unapplied(early, projector, batch)
                save_checkpoints(early, projector, todo)
                early.execute("COMMIT")
            except BaseException:
                early.execute("ROLLBACK")
                raise
        return len(todo)

    def _adopt_early_checkpoints(self) -> None:
        """Copy the checkpoints kept before the database existed into it (one transaction), then remove
        their file."""
        if not self.early_checkpoints.exists():
            return
        with _early(self.early_checkpoints) as early:
            rows = early.execute("SELECT projector, session, seq, event_hash FROM checkpoints").fetchall()
        by_projector: dict[str, list[Applied]] = {}
        for projector, session, seq, event_hash in rows:
            by_projector.setdefault(str(projector), []).append(
                _Checkpoint(str(session), int(seq), str(event_hash))
            )
        self._execute("BEGIN TRANSACTION")
        try:
            for projector, checkpoints in by_projector.items():
                applied = self._checkpoints(self._execute, projector, [c.session for c in checkpoints])
                later = {c.session: c for c in checkpoints if c.seq > applied.get(c.session, 0)}
                self._save_checkpoints(projector, later, set(applied))
            self._execute("COMMIT")
        except BaseException:
            if self._connection is not None:
                rollback(self._connection)
            raise
        self.early_checkpoints.unlink()

    async def idle(self) -> None:
        """Nothing to write: fold what the commits since the last checkpoint hold, if it is more than a
        little, and after much was written reopen the database (`readmodels.embedded.ladybug_checkpoints`)."""
        await self._in_thread(self._idle_sync)

    def _idle_sync(self) -> None:
        self._checkpoint_if_due(idle=True)
        if self.created and self._uncheckpointed.reopen_due():  # hands back the engine's cached pages
            written = self._uncheckpointed.since_opened
            self._close_sync()
            self._open_sync()
            log.info(
                "%s: reopened after %d events written, to hand back the pages it cached",
                self.db_path,
                written,
            )

    def _checkpoint_if_due(self, *, idle: bool) -> None:
        if self.created and self._uncheckpointed.due(idle=idle):
            self._execute("CHECKPOINT")
            self._uncheckpointed.checkpointed()

    def _checkpoints(self, execute: Execute, projector: str, sessions: list[str]) -> dict[str, int]:
        rows = execute(
            f"MATCH (c:{self._checkpoint_table}) WHERE c.projector = $projector AND c.session IN $sessions "
            "RETURN c.session AS session, c.seq AS seq",
            {"projector": projector, "sessions": sessions},
        )
        return {str(row["session"]): int(row["seq"]) for row in rows}

    def _save_checkpoints(self, projector: str, last: Mapping[str, Applied], known: set[str]) -> None:
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
        table = self._checkpoint_table
        new = [row["id"] for row in rows if row["session"] not in known]
        if new:
            self._execute(f"UNWIND $ids AS i CREATE (:{table} {{id: i}})", {"ids": new})
        if rows:
            self._execute(
                f"UNWIND $rows AS r MATCH (c:{table} {{id: r.id}}) SET c.projector = r.projector, "
                "c.session = r.session, c.seq = r.seq, c.event_hash = r.hash",
                {"rows": rows},
            )


class _Checkpoint(NamedTuple):
    session: str
    seq: int
    event_hash: str


@contextlib.contextmanager
def _early(path: Path) -> Iterator[sqlite3.Connection]:
    """The file of early checkpoints; SQLite's defaults (a rollback journal, a full sync at each commit)
    make a batch's checkpoints durable before the runner acknowledges it."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        yield connection
    finally:
        connection.close()


def _no_rows(cypher: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    return []
