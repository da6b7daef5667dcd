"""The resolving half of a bulk load (any backend), in worker processes so that it uses every core.

Sessions never share a key (every entity, edge and source is per session), so a log can be resolved by
several independent `BulkPlanner`s, one per group of sessions. `loader.BulkLoader` starts one worker per
core (`python -m readmodels.graph.bulk.worker DIR SPILL_EVERY_ROWS`: a plain subprocess, so it never
re-imports the caller's main module as multiprocessing would); each reads length-prefixed msgpack batches of
`EventProjection`s for its sessions on stdin, resolves them, and spills finished rows to Arrow files of its
own (`SpilledTables`). `FINISH` + the projector's name means "finish": the worker spills the rest and
writes one length-prefixed `SpillResult` on stdout: the files it wrote, or its error.
"""

from __future__ import annotations

import contextlib
import struct
import sys
import traceback
from pathlib import Path
from typing import IO

import msgspec
import pyarrow as pa

from readmodels.graph.bulk.resolve import BulkPlanner
from readmodels.graph.bulk.tables import CopyTarget, copy_tables
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


def write_message(stream: IO[bytes], data: bytes) -> None:
    stream.write(_LENGTH.pack(len(data)) + data)
    stream.flush()


def read_message(stream: IO[bytes]) -> bytes:
    """One length-prefixed message; `EOFError` when the other side has gone."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the pipe closed")
    (length,) = _LENGTH.unpack(header)
    data = stream.read(length)
    if len(data) < length:
        raise EOFError("the pipe closed mid-message")
    return data


_LENGTH = struct.Struct(">Q")


def run_worker(incoming: IO[bytes], outgoing: IO[bytes], directory: Path, spill_every_rows: int) -> None:
    """Resolve batches until told to finish, then report the files (or the error)."""
    decoder = msgspec.msgpack.Decoder(list[EventProjection])
    planner = BulkPlanner()
    spilled = SpilledTables(directory)
    try:
        while not (data := read_message(incoming)).startswith(FINISH):
            planner.add(decoder.decode(data))
            if planner.held_rows >= spill_every_rows:
                spilled.write(planner.take_finished())
        spilled.write(planner.finish(), projector=data.removeprefix(FINISH).decode())
        result = SpillResult(files=spilled.close())
    except BaseException as exc:
        spilled.close()
        result = SpillResult(error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    with contextlib.suppress(OSError):
        write_message(outgoing, msgspec.msgpack.encode(result))


if __name__ == "__main__":
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must never corrupt the replies
    run_worker(sys.stdin.buffer, replies, Path(sys.argv[1]), int(sys.argv[2]))
