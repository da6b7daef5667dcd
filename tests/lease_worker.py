"""A projector worker that takes its consumer's lease, and records what it applies in a file shared with the
other workers: one line per event, `pid session seq`; the file is also the read model's checkpoint (the
highest seq per session, whoever wrote it). Run by tests/test_projector_failover.py as
`python -m tests.lease_worker FILE LEASE_S` with the settings in `EVENTLOOM_*` variables; SIGINT stops it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.lease import ConsumerLease
from projectors.runner import ProjectorRunner, RunnerOptions

CONSUMER = "projector-recorded"
OPTIONS = RunnerOptions(batch=50, fetch_timeout_s=5.0, ack_wait_s=2.0)
"""A long fetch: an idle worker always has a pull request waiting, so what is appended while it is stopped
(SIGSTOP) is delivered to it, and it holds events it has not applied when it resumes."""


class Recorder:
    """Appends `pid session seq` per applied event to `path` (O_APPEND: the workers' lines never mix)."""

    name = "recorded"

    def __init__(self, path: Path) -> None:
        self.path = path

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        applied = await asyncio.to_thread(read_lines, self.path)
        seqs: dict[str, int] = {}
        for _, session, seq in applied:
            if session in sessions:
                seqs[session] = max(seqs.get(session, 0), seq)
        return seqs

    async def apply(self, events: Sequence[Event]) -> None:
        lines = "".join(f"{os.getpid()} {e.session} {e.seq}\n" for e in events)
        await asyncio.to_thread(_append, self.path, lines)


def read_lines(path: Path) -> list[tuple[int, str, int]]:
    """(pid, session, seq) per line of `path` (none while it does not exist)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        pid, session, seq = line.split()
        rows.append((int(pid), session, int(seq)))
    return rows


def _append(path: Path, text: str) -> None:
    with open(path, "a") as file:
        file.write(text)
        file.flush()
        os.fsync(file.fileno())


def leased_runner(log: EventLog, projector: Recorder, lease_s: float) -> ProjectorRunner:
    lease = ConsumerLease(log.client, CONSUMER, lease_s)
    keys = KeyStore(log.settings.data_dir)
    return ProjectorRunner(
        log.client, log.layout, projector, consumer=CONSUMER, options=OPTIONS, keys=keys, lease=lease
    )


async def main(settings: Settings, path: Path, lease_s: float) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    async with await EventLog.open(settings) as log:
        await leased_runner(log, Recorder(path), lease_s).run(stop)


if __name__ == "__main__":
    asyncio.run(main(Settings.from_env(), Path(sys.argv[1]), float(sys.argv[2])))
