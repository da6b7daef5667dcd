"""When a LadybugDB database folds what it committed into its file (a checkpoint).

Until a checkpoint, the engine keeps every committed change in memory, not only in its write-ahead log:
about 0.3 MB for each commit however small, plus ~12 KB an event of this project's graph (measured on a
copy of a 20,000-event graph: one-event commits grew the process 300 KB each, and a `CHECKPOINT` handed
all of it back). A bound on the log's size alone let a node fed one event a second grow ~1 GB an hour:
its log grows only ~15 KB a commit. So a checkpoint is also due after a number of commits or events.

A checkpoint costs more as the database grows (0.2 s at 2,500 events, 3 s at 20,000 here): its cost follows
the rows and string columns of each relationship table the commits touched, not how much they wrote
(`bench/checkpoint.py`). The engine takes it inside the commit, holding every event behind it: an idle
store folds early and cheaply, a busy one only past the larger bounds. Reads go on beside it, slower.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

MiB: Final = 1024 * 1024


@dataclass(frozen=True)
class CheckpointPolicy:
    wal_bytes: int = 256 * MiB
    """Under load: past this much write-ahead log."""
    commits: int = 512
    """Under load: after this many commits (~150 MB held). A busy projector takes bigger batches, so this
    binds only while events trickle in."""
    events: int = 50_000
    """Under load: after this many events (~600 MB held): about where a 256 MiB log used to fold in a burst,
    so a long backlog pays no more checkpoints than before."""
    idle_wal_bytes: int = 16 * MiB
    idle_commits: int = 128
    """Idle: one event a second folds every two minutes or so, ~40 MB held at most."""
    idle_events: int = 2_000
    """Idle: a burst's memory is handed back once it is projected."""
    reopen_events: int = 20_000
    """Idle, once this many events were written since the database was opened: checkpoint whatever the
    bounds above say (a catch-up's last few commits are below them), then close and open it again.
    The engine's buffer pool keeps every page it has read or written until the database is closed (at
    50,000 events of bench/corpus.py: 424 MB resident, 181 MB once reopened; reopening takes ~0.1 s)."""


DEFAULT_POLICY: Final = CheckpointPolicy()


class Uncheckpointed:
    """What one database has committed since its last checkpoint, against `policy`."""

    def __init__(self, database: Path, policy: CheckpointPolicy = DEFAULT_POLICY) -> None:
        self._wal = database.with_name(database.name + ".wal")
        self.policy = policy
        self.commits = 0
        self.events = 0
        self.since_opened = 0

    def committed(self, events: int) -> None:
        self.commits += 1
        self.events += events
        self.since_opened += events

    def reopened(self) -> None:
        self.since_opened = 0

    def reopen_due(self) -> bool:
        """Whether to close and open the database again: idle, checkpointed, and much written since."""
        return not self.commits and self.since_opened >= self.policy.reopen_events

    def checkpointed(self) -> None:
        self.commits = self.events = 0

    def wal_bytes(self) -> int:
        try:
            return self._wal.stat().st_size
        except FileNotFoundError:
            return 0

    def due(self, *, idle: bool) -> bool:
        """Whether to checkpoint now: `idle` when nothing waits to be written."""
        policy = self.policy
        if idle:
            if not self.commits and not self.wal_bytes():
                return False
            return (
                self.commits >= policy.idle_commits
                or self.events >= policy.idle_events
                or self.wal_bytes() > policy.idle_wal_bytes
                or self.since_opened >= policy.reopen_events  # a reopen waits for this checkpoint
            )
        return (
            self.commits >= policy.commits
            or self.events >= policy.events
            or self.wal_bytes() > policy.wal_bytes
        )
