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
    """Seq and hash of the last whole event in the file. A line not yet ended by its newline is one the
    mirror is still writing (a reader beside a live node) or a torn tail (`repair_torn_tail` cuts it at
    start-up): either way not an event yet, so the tip is the line before it."""
    if not path.exists() or path.stat().st_size == 0:
        return GENESIS
    with open(path, "rb") as handle:
        line = _read_last_line(handle, _terminated_end(handle, path.stat().st_size))
    if not line:
        return GENESIS
    event = decode_event(line)
    return ChainTip(event.seq, event.hash)


class LedgerWriter:
    """Appends encoded events to per-session files; `sync()` makes everything written so far durable.

    A write or sync that fails (a full disk: ENOSPC, EFBIG, EDQUOT) first cuts every file written since
    the last sync back to its synced length, then raises: no torn or unsynced line is left for the retry
    to append after. The files are written unbuffered, so no rest of a failed write waits in a buffer.
    """

    def __init__(self, ledger_dir: Path) -> None:
        self.ledger_dir = ledger_dir
        self._handles: dict[str, int] = {}
        self._synced: dict[str, int] = {}  # each open file's length at its last sync
        self._dirty: set[str] = set()
        self.cut_bytes = 0  # what failed writes left behind and `cut_back` removed, all told

    def write(self, session: str, lines: list[bytes]) -> None:
        handle = self._handles.get(session)
        if handle is None:
            self.ledger_dir.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            handle = os.open(ledger_path(self.ledger_dir, session), flags, 0o644)
            self._handles[session] = handle
            self._synced[session] = os.fstat(handle).st_size
        self._dirty.add(session)
        try:
            _write_all(handle, b"\n".join(lines) + b"\n")
        except OSError:
            self.cut_back()
            raise

    def sync(self) -> None:
        try:
            for session in self._dirty:
                os.fsync(self._handles[session])
            if self._dirty:
                _fsync_dir(self.ledger_dir)
        except OSError:
            self.cut_back()  # after a failed fsync the pages' fate is unknown: they are written again
            raise
        for session in self._dirty:
            self._synced[session] = os.fstat(self._handles[session]).st_size
        self._dirty.clear()

    def cut_back(self) -> int:
        """Truncate every file written since the last sync to its synced length; the bytes removed."""
        removed = 0
        for session in sorted(self._dirty):
            handle, keep = self._handles[session], self._synced[session]
            removed += max(0, os.fstat(handle).st_size - keep)
            os.ftruncate(handle, keep)  # shrinking needs no space, and no file-size limit forbids it
            os.fsync(handle)
            self._dirty.discard(session)
        self.cut_bytes += removed
        return removed

    def close(self) -> None:
        try:
            self.sync()
        finally:
            for handle in self._handles.values():
                os.close(handle)
            self._handles.clear()
            self._synced.clear()


def _write_all(handle: int, data: bytes) -> None:
    """os.write until all of `data` is written; a short write (the disk filled up mid-way) is followed by
    one more, which raises the reason."""
    view = memoryview(data)
    while view:
        view = view[os.write(handle, view) :]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
