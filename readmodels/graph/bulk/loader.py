"""`BulkLoader`: fills an EMPTY graph from a whole log, for `eventloom rebuild`, on any backend.

A rebuild writes into a store that nothing reads until it is swapped in, so instead of one transaction per
batch the log is resolved in memory by `resolve.BulkPlanner`s in worker processes, one per core, each for
its share of the sessions (`worker`); they spill every finished row once, in its final form, to Arrow files
(memory stays bounded by the live graph). At `close` a `TableSink` loads every table from all workers'
files, node tables first and checkpoints last: LadybugDB with `COPY` (`readmodels.embedded.graph_bulk`),
Neo4j with large `UNWIND` batches (`readmodels.neo4j.bulk`). If the rebuild stops early, `close` loads what
was resolved, with matching checkpoints; if resolving failed, nothing is loaded and `ReadModelBrokenError`
is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, TypeVar

import msgspec

from eventloom.errors import ReadModelBrokenError
from readmodels.graph.bulk.tables import CopyTarget
from readmodels.graph.bulk.worker import FINISH, SpillResult, read_message, write_message
from readmodels.graph.model import EventProjection
from readmodels.graph.protocol import GraphStoreError

T = TypeVar("T")
WORKER_MODULE = "readmodels.graph.bulk.worker"
SpilledFiles = dict[CopyTarget, list[str]]
LoadProgress = Callable[[int, int], None]
SPILL_EVERY_ROWS = 20_000
"""Resolved rows held in memory before the finished ones are spilled to disk."""


class TableSink(Protocol):
    """Where a bulk load's tables go: an empty store of one backend."""

    name: str
    """What is being filled (a path, a URI), for messages."""

    async def open(self) -> None:
        """Connect and apply the schema; `GraphStoreError` if the store already holds a graph."""
        ...

    async def load(self, files: SpilledFiles, progress: LoadProgress | None = None) -> None:
        """Load every table from its Arrow IPC files: node tables first, checkpoints last.

        `progress(rows_loaded, rows_total)`, when given, is called as the load advances."""
        ...

    async def close(self) -> None: ...


class BulkLoader:
    """`GraphWriter` that bulk-loads the empty store behind `sink`; refuses one that holds a graph."""

    def __init__(
        self,
        sink: TableSink,
        spill_dir: Path,
        *,
        spill_every_rows: int = SPILL_EVERY_ROWS,
        workers: int | None = None,
    ) -> None:
        self.sink = sink
        self.load_progress: LoadProgress | None = None
        """Called with (rows loaded, rows in all) while `close` loads the resolved tables."""
        self._spill_dir = spill_dir
        self._spill_every = spill_every_rows
        self._worker_count = workers or max(1, min(os.cpu_count() or 1, 8))
        self._workers: list[subprocess.Popen[bytes]] = []
        self._encoder = msgspec.msgpack.Encoder()
        self._projector: str | None = None
        self._thread: ThreadPoolExecutor | None = None
        self._failed: str | None = None
        self._accepted: dict[str, int] = {}  # last seq per session handed to a worker
        self._sending: asyncio.Future[None] | None = None

    async def open(self) -> None:
        if self._thread is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="bulk-load")
            try:
                await self.sink.open()
                await self._run(self._start_sync)
            except BaseException:
                await self.close()
                raise

    def _start_sync(self) -> None:
        shutil.rmtree(self._spill_dir, ignore_errors=True)
        self._spill_dir.mkdir(parents=True)
        self._start_workers()  # they start up (a second or so) while the first batch is fetched

    def _start_workers(self) -> None:
        for number in range(self._worker_count):
            directory = self._spill_dir / f"worker-{number}"
            self._workers.append(
                subprocess.Popen(
                    [sys.executable, "-m", WORKER_MODULE, str(directory), str(self._spill_every)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                )
            )

    async def close(self) -> None:
        """Load what was resolved; `ReadModelBrokenError` if resolving failed (then nothing is loaded)."""
        if self._thread is None:
            return
        try:
            with contextlib.suppress(ReadModelBrokenError):  # recorded in `_failed`
                await self._settle()
            results = await self._run(self._finish_workers)
            if self._failed is None:
                await self.sink.load(_files(results), self.load_progress)
        finally:
            try:
                await self.sink.close()
            finally:
                await self._run(self._close_sync)
                self._thread.shutdown(wait=False)
                self._thread = None
        if self._failed is not None:
            raise ReadModelBrokenError(f"the bulk load of {self.sink.name} failed: {self._failed}")

    def _finish_workers(self) -> list[SpillResult]:
        results: list[SpillResult] = []
        for worker in self._workers:
            assert worker.stdin is not None and worker.stdout is not None
            try:
                write_message(worker.stdin, FINISH + (self._projector or "").encode())
                result = msgspec.msgpack.decode(read_message(worker.stdout), type=SpillResult)
            except (OSError, EOFError) as exc:
                result = SpillResult(
                    error=f"bulk worker {worker.pid} died (exit code {worker.poll()}): {exc}"
                )
            if result.error is not None and self._failed is None:
                self._failed = result.error
            results.append(result)
        return results

    def _close_sync(self) -> None:
        for worker in self._workers:
            for stream in (worker.stdin, worker.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self._workers.clear()
        shutil.rmtree(self._spill_dir, ignore_errors=True)

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        self._check(projector)
        return {session: self._accepted[session] for session in sessions if session in self._accepted}

    async def apply(self, projector: str, projections: Sequence[EventProjection]) -> int:
        """Hand a batch to the workers and return while they resolve, so the next batch can be fetched
        meanwhile. A failure surfaces as `ReadModelBrokenError` on a later call, and nothing is loaded."""
        self._check(projector)
        self._projector = projector
        shares: list[list[EventProjection]] = [[] for _ in self._workers]
        for projection in projections:
            event = projection.event
            if event.seq > self._accepted.get(event.session, 0):
                self._accepted[event.session] = event.seq
                shares[zlib.crc32(event.session.encode()) % len(shares)].append(projection)
        await self._settle()
        if any(shares):
            self._sending = asyncio.ensure_future(self._run(lambda: self._send_sync(shares)))
        return sum(len(share) for share in shares)

    def _send_sync(self, shares: list[list[EventProjection]]) -> None:
        """Send each worker its share (blocks while a worker is still busy with the one before)."""
        try:
            for worker, share in zip(self._workers, shares, strict=True):
                if share:
                    assert worker.stdin is not None
                    try:
                        write_message(worker.stdin, self._encoder.encode(share))
                    except OSError as exc:
                        raise OSError(
                            f"bulk worker {worker.pid} is gone: {_last_words(worker, exc)}"
                        ) from exc
        except BaseException as exc:
            self._failed = f"{type(exc).__name__}: {exc}"  # the workers' state is no longer the log's
            raise

    async def _settle(self) -> None:
        """Wait until the batch before has been handed over."""
        sending, self._sending = self._sending, None
        if sending is not None:
            try:
                await sending
            except BaseException as exc:
                raise ReadModelBrokenError(f"the bulk load of {self.sink.name} failed: {exc}") from exc

    def _check(self, projector: str) -> None:
        if self._failed is not None:
            raise ReadModelBrokenError(f"the bulk load of {self.sink.name} failed earlier: {self._failed}")
        if self._thread is None:
            raise GraphStoreError("the bulk loader is not open")
        if self._projector not in (None, projector):
            raise GraphStoreError(f"this bulk load is for projector {self._projector!r}, not {projector!r}")

    async def _run(self, fn: Callable[[], T]) -> T:
        assert self._thread is not None
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)


def _last_words(worker: subprocess.Popen[bytes], error: OSError) -> str:
    """Why a worker stopped: the error it reported before exiting, else how it died."""
    with contextlib.suppress(OSError, EOFError, msgspec.DecodeError):
        if worker.stdout is not None:
            result = msgspec.msgpack.decode(read_message(worker.stdout), type=SpillResult)
            if result.error:
                return result.error
    return f"{error} (exit code {worker.wait()})"


def _files(results: list[SpillResult]) -> SpilledFiles:
    files: SpilledFiles = {}
    for result in results:
        for target, path in result.files:
            files.setdefault(target, []).append(path)
    return files
