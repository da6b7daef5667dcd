"""Ledger files on disk: reading the tip, repairing a torn last line, appending with fsync.

Everything here is synchronous file I/O; async callers run it in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import msgspec

from eventloom.chain import GENESIS, ChainTip
from eventloom.event import SESSION_PATTERN, decode_event, utc_timestamp

_TAIL_CHUNK = 64 * 1024


INCIDENTS_NAME = "incidents.log"  # not *.jsonl: never taken for a session


def record_incident(ledger_dir: Path, what: str) -> None:
    """Append one line (`<utc time> <what>`) to `<ledger>/incidents.log`, the ledger's own account of loss."""
    ledger_dir.mkdir(parents=True, exist_ok=True)
    line = f"{utc_timestamp()} {what}\n".encode()
    with open(ledger_dir / INCIDENTS_NAME, "ab") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def read_incidents(ledger_dir: Path) -> list[str]:
    try:
        return (ledger_dir / INCIDENTS_NAME).read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return []


def ledger_path(ledger_dir: Path, session: str) -> Path:
    return ledger_dir / f"{session}.jsonl"


def ledger_sessions(ledger_dir: Path) -> list[str]:
    if not ledger_dir.exists():
        return []
    return sorted(p.stem for p in ledger_dir.glob("*.jsonl") if SESSION_PATTERN.fullmatch(p.stem))


def iter_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line without its newline) for every line, the last one even if torn."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            yield number, line.rstrip(b"\n")


def repair_torn_tail(path: Path) -> int:
    """Cut trailing lines that are unterminated or not whole events; returns the bytes removed.

    Only the end of the file is repaired: that is where a crash mid-write leaves damage. Damage anywhere
    else is tampering or corruption, and is left for `verify` to report.
    """
    if not path.exists():
        return 0
    size = path.stat().st_size
    with open(path, "rb+") as handle:
        keep = _terminated_end(handle, size)
        while keep > 0:
            line = _read_last_line(handle, keep)
            if line is not None and _decodes(line):
                break
            keep -= len(line or b"") + 1
        if keep == size:
            return 0
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
    return size - keep


def _terminated_end(handle: BinaryIO, size: int) -> int:
    """Offset just past the last newline in the file (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        handle.seek(start)
        chunk = handle.read(end - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def _read_last_line(handle: BinaryIO, end: int) -> bytes | None:
    """The newline-terminated line that ends at `end` (exclusive), without its newline."""
    if end <= 0:
        return None
    pos = end - 1
    collected = b""
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        handle.seek(start)
        chunk = handle.read(pos - start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            return chunk[cut + 1 :] + collected
        collected = chunk + collected
        pos = start
    return collected


def _decodes(line: bytes) -> bool:
    try:
        decode_event(line)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
    return True


def read_tip(path: Path) -> ChainTip:
    """Seq and hash of the last whole event in the file (call after repair_torn_tail)."""
    if not path.exists() or path.stat().st_size == 0:
        return GENESIS
    with open(path, "rb") as handle:
        line = _read_last_line(handle, path.stat().st_size)
    if not line:
        return GENESIS
    event = decode_event(line)
    return ChainTip(event.seq, event.hash)


class LedgerWriter:
    """Appends encoded events to per-session files; `sync()` makes everything written so far durable."""

    def __init__(self, ledger_dir: Path) -> None:
        self.ledger_dir = ledger_dir
        self._handles: dict[str, BinaryIO] = {}
        self._dirty: set[str] = set()

    def write(self, session: str, lines: list[bytes]) -> None:
        handle = self._handles.get(session)
        if handle is None:
            self.ledger_dir.mkdir(parents=True, exist_ok=True)
            handle = open(ledger_path(self.ledger_dir, session), "ab")  # noqa: SIM115 - kept open across batches
            self._handles[session] = handle
        handle.write(b"\n".join(lines) + b"\n")
        self._dirty.add(session)

    def sync(self) -> None:
        for session in self._dirty:
            handle = self._handles[session]
            handle.flush()
            os.fsync(handle.fileno())
        if self._dirty:
            _fsync_dir(self.ledger_dir)
        self._dirty.clear()

    def close(self) -> None:
        self.sync()
        for handle in self._handles.values():
            handle.close()
        self._handles.clear()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
