"""The resolving half of a LadybugDB bulk load, in worker processes so that it uses every core.

Sessions never share a key (every entity, edge and source is per session), so a log can be resolved by
several independent `BulkPlanner`s, one per group of sessions. `LadybugBulkLoader` starts one worker per
core; each receives msgpack-encoded `EventProjection` batches for its sessions over a pipe, resolves them,
and spills finished rows to Arrow files of its own (`SpilledTables`). `FINISH` + the projector's name means
"finish": the worker spills the rest and answers with the files it wrote, or with its error.
"""

from __future__ import annotations

import contextlib
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

import msgspec
import pyarrow as pa

from readmodels.graph.bulk import BulkPlanner
from readmodels.graph.ladybug_copy import CopyTarget, copy_tables
from readmodels.graph.model import EventProjection
from readmodels.graph.plan import WritePlan

FINISH = b"finish:"
"""Prefix of the last message, followed by the projector's name (the checkpoints carry it). A batch is a
msgpack array, whose first byte is never `f`."""


class SpillResult(msgspec.Struct, frozen=True):
    """What a worker wrote (`files`: one Arrow file per `COPY` target), or why it failed."""

    files: list[tuple[CopyTarget, str]] = []
    error: str | None = None


class SpilledTables:
    """Arrow files, one per `COPY` target, appended to as a planner hands out finished rows."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._writers: dict[CopyTarget, tuple[Path, pa.RecordBatchFileWriter]] = {}
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, plan: WritePlan, projector: str = "") -> None:
        """Append `plan`'s rows; `projector` names its checkpoints (only a planner's last plan has any)."""
        for target, table in copy_tables(plan, projector).items():
            if target not in self._writers:
                path = self._directory / f"{len(self._writers):03d}.arrow"
                self._writers[target] = (path, pa.ipc.new_file(str(path), target.schema))
            self._writers[target][1].write_table(table)

    def close(self) -> list[tuple[CopyTarget, str]]:
        files = [(target, str(path)) for target, (path, _) in self._writers.items()]
        for _, writer in self._writers.values():
            with contextlib.suppress(Exception):
                writer.close()
        self._writers.clear()
        return files


def run_worker(connection: Connection, directory: str, spill_every_rows: int) -> None:
    """A worker process's main: resolve batches until told to finish, then report the files."""
    decoder = msgspec.msgpack.Decoder(list[EventProjection])
    planner = BulkPlanner()
    spilled = SpilledTables(Path(directory))
    try:
        while not (data := connection.recv_bytes()).startswith(FINISH):
            planner.add(decoder.decode(data))
            if planner.held_rows >= spill_every_rows:
                spilled.write(planner.take_finished())
        spilled.write(planner.finish(), projector=data.removeprefix(FINISH).decode())
        result = SpillResult(files=spilled.close())
    except BaseException as exc:
        spilled.close()
        result = SpillResult(error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    connection.send(result)
    connection.close()
