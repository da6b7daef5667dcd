"""Bulk loading an empty LadybugDB graph: `COPY` every table from the workers' Arrow files at once.

`COPY` into empty tables is LadybugDB's fast path. It maps columns by position (see
`readmodels.graph.bulk.tables`).
Not one transaction: `COPY` into empty tables is much faster on its own (a transaction defers the work to
a ~1 s commit). A load that fails half-way leaves a generation without checkpoints that is never swapped
in; `eventloom rebuild` starts the next one afresh.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import ladybug
import pyarrow as pa

from readmodels.embedded.graph_schema import apply_migrations, typed_rel_ddl
from readmodels.embedded.graph_store import DEFAULT_BUFFER_POOL_SIZE, DEFAULT_CHECKPOINT_THRESHOLD
from readmodels.embedded.ladybug_io import open_database, run_rows
from readmodels.graph.bulk.loader import SPILL_EVERY_ROWS, BulkLoader, LoadProgress, SpilledFiles
from readmodels.graph.bulk.tables import CopyTarget, copy_order
from readmodels.graph.protocol import GraphStoreError


def copy_statement(target: CopyTarget) -> str:
    """`COPY` from the Arrow table passed as `$rows`."""
    options = f" (from='{target.pair[0]}', to='{target.pair[1]}')" if target.pair else ""
    return f"COPY `{target.table}` FROM $rows{options}"


class LadybugTableSink:
    """The empty LadybugDB database at `path` (created if missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = str(path)
        self._db: ladybug.Database | None = None

    async def open(self) -> None:
        await asyncio.to_thread(self._open_sync)

    def _open_sync(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = open_database(
            str(self.path),
            buffer_pool_size=DEFAULT_BUFFER_POOL_SIZE,
            checkpoint_threshold=DEFAULT_CHECKPOINT_THRESHOLD,
        )
        connection = ladybug.Connection(self._db)
        try:
            apply_migrations(lambda cypher, params: run_rows(connection, cypher, params))
            if run_rows(connection, "MATCH (c:Checkpoint) RETURN count(c) AS n", None)[0]["n"]:
                raise GraphStoreError(f"{self.path} already holds a graph; bulk loading needs an empty one")
        finally:
            connection.close()

    async def load(self, files: SpilledFiles, progress: LoadProgress | None = None) -> None:
        await asyncio.to_thread(self._load_sync, files)  # a few large COPYs: not worth reporting

    def _load_sync(self, files: SpilledFiles) -> None:
        assert self._db is not None
        connection = ladybug.Connection(self._db)
        try:
            for label in sorted({target.typed for target in files if target.typed is not None}):
                run_rows(connection, typed_rel_ddl(label), None)
            for target in sorted(files, key=copy_order):
                with contextlib.ExitStack() as stack:  # memory-mapped: read in place, never all in memory
                    parts = [
                        pa.ipc.open_file(stack.enter_context(pa.memory_map(path))).read_all()
                        for path in files[target]
                    ]
                    run_rows(connection, copy_statement(target), {"rows": pa.concat_tables(parts)})
        finally:
            connection.close()

    async def close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            await asyncio.to_thread(db.close)


class LadybugBulkLoader(BulkLoader):
    """`GraphWriter` that bulk-loads the EMPTY LadybugDB database at `path`; refuses one holding a graph."""

    def __init__(
        self, path: str | Path, *, spill_every_rows: int = SPILL_EVERY_ROWS, workers: int | None = None
    ) -> None:
        self.path = Path(path)
        super().__init__(
            LadybugTableSink(self.path),
            self.path.parent / f"{self.path.name}.spill",
            spill_every_rows=spill_every_rows,
            workers=workers,
        )
