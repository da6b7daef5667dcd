"""`LadybugBulkLoader`: fills an empty LadybugDB graph from a whole log, for `eventloom rebuild`.

A rebuild writes into a new generation that nothing reads until it is swapped in, so instead of one
transaction per batch it resolves the log with `bulk.BulkPlanner`, spills each finished row once, in its
final form, to an Arrow file per table (memory stays bounded by the live graph), and at `close` loads
every file with `COPY`, which is LadybugDB's fast path into empty tables, checkpoints last. If the
rebuild stops early, `close` loads what was resolved, with matching checkpoints.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import ladybug
import pyarrow as pa

from eventloom.errors import ReadModelBrokenError
from readmodels.graph.bulk import BulkPlanner
from readmodels.graph.ladybug import DEFAULT_CHECKPOINT_THRESHOLD, run_rows
from readmodels.graph.ladybug_copy import CopyTarget, copy_order, copy_tables
from readmodels.graph.ladybug_schema import apply_migrations, typed_rel_ddl
from readmodels.graph.model import EventProjection
from readmodels.graph.plan import WritePlan
from readmodels.graph.protocol import GraphStoreError

T = TypeVar("T")
SPILL_EVERY_ROWS = 20_000
"""Resolved rows held in memory before the finished ones are spilled to disk."""


class LadybugBulkLoader:
    """`GraphWriter` that bulk-loads the EMPTY database at `path`; refuses one that holds a graph."""

    def __init__(self, path: str | Path, *, spill_every_rows: int = SPILL_EVERY_ROWS) -> None:
        self.path = Path(path)
        self._spill_dir = self.path.parent / f"{self.path.name}.spill"
        self._spill_every = spill_every_rows
        self._planner = BulkPlanner()
        self._projector: str | None = None
        self._writers: dict[CopyTarget, tuple[Path, pa.RecordBatchFileWriter]] = {}
        self._typed: set[str] = set()
        self._thread: ThreadPoolExecutor | None = None
        self._db: ladybug.Database | None = None
        self._failed: BaseException | None = None
        self._accepted: dict[str, int] = {}  # last seq per session handed to the planner
        self._resolving: asyncio.Future[None] | None = None

    async def open(self) -> None:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="ladybug-bulk")
            await self._run(self._open_sync)

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = ladybug.Database(str(self.path), checkpoint_threshold=DEFAULT_CHECKPOINT_THRESHOLD)
        connection = ladybug.Connection(self._db)
        try:
            execute = _executor(connection)
            apply_migrations(execute)
            if execute("MATCH (c:Checkpoint) RETURN count(c) AS n", None)[0]["n"]:
                raise GraphStoreError(f"{self.path} already holds a graph; bulk loading needs an empty one")
        finally:
            connection.close()
        shutil.rmtree(self._spill_dir, ignore_errors=True)
        self._spill_dir.mkdir(parents=True)

    async def close(self) -> None:
        """Load what was resolved; `ReadModelBrokenError` if resolving failed (then nothing is loaded)."""
        if self._thread is None:
            return
        try:
            with contextlib.suppress(ReadModelBrokenError):  # recorded in `_failed`
                await self._settle()
            if self._failed is None and self._db is not None:
                await self._run(self._load_sync)
        finally:
            await self._run(self._close_sync)
            self._thread.shutdown(wait=False)
            self._thread = None
        if self._failed is not None:
            raise ReadModelBrokenError(f"the bulk load of {self.path} failed: {self._failed}")

    def _close_sync(self) -> None:
        for _, writer in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
        self._writers.clear()
        shutil.rmtree(self._spill_dir, ignore_errors=True)
        if self._db is not None:
            self._db.close()
            self._db = None

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        self._check(projector)
        return {session: self._accepted[session] for session in sessions if session in self._accepted}

    async def apply(self, projector: str, projections: Sequence[EventProjection]) -> int:
        """Hand a batch to the planner and return while it resolves, so the next batch can be fetched
        meanwhile. A failure surfaces as `ReadModelBrokenError` on a later call, and nothing is loaded."""
        self._check(projector)
        self._projector = projector
        todo: list[EventProjection] = []
        for projection in projections:
            event = projection.event
            if event.seq > self._accepted.get(event.session, 0):
                self._accepted[event.session] = event.seq
                todo.append(projection)
        await self._settle()
        if todo:
            self._resolving = asyncio.ensure_future(self._run(lambda: self._add_sync(todo)))
        return len(todo)

    async def _settle(self) -> None:
        """Wait for the batch being resolved."""
        resolving, self._resolving = self._resolving, None
        if resolving is not None:
            try:
                await resolving
            except BaseException as exc:
                raise ReadModelBrokenError(f"the bulk load of {self.path} failed: {exc}") from exc

    def _check(self, projector: str) -> None:
        if self._failed is not None:
            raise ReadModelBrokenError(f"the bulk load of {self.path} failed earlier: {self._failed}")
        if self._thread is None:
            raise GraphStoreError("the bulk loader is not open")
        if self._projector not in (None, projector):
            raise GraphStoreError(f"this bulk load is for projector {self._projector!r}, not {projector!r}")

    def _add_sync(self, projections: list[EventProjection]) -> None:
        try:
            self._planner.add(projections)
            if self._planner.held_rows >= self._spill_every:
                self._spill(self._planner.take_finished())
        except BaseException as exc:
            self._failed = exc  # the planner's state is no longer the log's: never load it
            raise

    def _spill(self, plan: WritePlan) -> None:
        for target, table in copy_tables(plan, self._projector or "").items():
            if target.typed is not None:
                self._typed.add(target.typed)
            if target not in self._writers:
                path = self._spill_dir / f"{len(self._writers):03d}.arrow"
                self._writers[target] = (path, pa.ipc.new_file(str(path), target.schema))
            self._writers[target][1].write_table(table)

    def _load_sync(self) -> None:
        """`COPY` every spilled table, nodes first and checkpoints last.

        Not one transaction: LadybugDB's `COPY` into empty tables is much faster on its own (a
        transaction defers the work to a ~1 s commit). A load that fails half-way leaves a generation
        without checkpoints that is never swapped in; `eventloom rebuild` starts the next one afresh.
        """
        self._spill(self._planner.finish())
        files = {target: path for target, (path, _) in self._writers.items()}
        for _, writer in self._writers.values():
            writer.close()
        self._writers.clear()
        assert self._db is not None
        connection = ladybug.Connection(self._db)
        execute = _executor(connection)
        try:
            for label in sorted(self._typed):
                execute(typed_rel_ddl(label), None)
            for target in sorted(files, key=copy_order):
                with pa.memory_map(str(files[target])) as mapped:  # read in place, never all in memory
                    table = pa.ipc.open_file(mapped).read_all()
                    execute(target.copy_statement(), {"rows": table})
        finally:
            connection.close()

    async def _run(self, fn: Callable[[], T]) -> T:
        assert self._thread is not None
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)


def _executor(connection: ladybug.Connection) -> Callable[[str, dict[str, Any] | None], list[dict[str, Any]]]:
    return lambda cypher, params: run_rows(connection, cypher, params)
