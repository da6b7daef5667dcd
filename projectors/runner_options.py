"""A projector runner's knobs, its counters, and who hears its troubles."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from eventloom.settings import DEFAULT_PROJECTOR_ACK_WAIT_S, NODE_PROJECTOR_BATCH
from eventloom.stages import StageTimes


@dataclass(frozen=True)
class RunnerOptions:
    batch: int = NODE_PROJECTOR_BATCH
    """The largest batch. A fetch takes what is waiting, up to this: a caught-up projector applies a few
    events at a time (fresh), one behind applies large batches (each batch's fixed costs, a transaction
    and a statement per kind of row, shared by more events). What a worker holds in memory grows with it
    (`EVENTLOOM_PROJECTOR_BATCH`, `Settings.worker_batch`)."""
    linger_s: float = 0.0
    """A fetch that brings fewer than `batch` events waits this long in all for more before the batch is
    applied (`EVENTLOOM_PROJECTOR_LINGER_MS`, `Settings.projector_linger_ms`): fewer commits under a
    trickle. 0: apply what came at once."""
    max_deliver: int = 5
    backoff_s: Sequence[float] = (0.5, 2.0, 10.0, 30.0)
    fetch_timeout_s: float = 0.5
    ack_wait_s: float = DEFAULT_PROJECTOR_ACK_WAIT_S
    """What this worker holds unacknowledged this long goes to another worker of its consumer (failover);
    while alive it keeps its batch with in-progress acks (`projectors.keepalive`)."""
    unavailable_retry_s: Sequence[float] = (0.5, 1.0, 2.0, 5.0)
    retry_check_s: float = 5.0


@dataclass
class RunnerStats:
    applied: int = 0
    skipped: int = 0
    dead_lettered: int = 0
    refused: int = 0  # events that failed verification (also counted in dead_lettered)
    last_refusal: str | None = None
    retried: int = 0
    fenced: int = 0  # times this worker lost its lease and stood by again
    batches: int = 0
    paused_s: float = 0.0
    started_at: float = field(default_factory=time.monotonic)
    stages: StageTimes = field(default_factory=StageTimes)

    def summary(self) -> str:
        """What the worker did, in how long, and where its time went: one line for a person."""
        ran_s = time.monotonic() - self.started_at
        line = (
            f"{self.applied} applied, {self.skipped} skipped, {self.dead_lettered} dead-lettered "
            f"({self.refused} refused as unverified), {self.retried} retried, {self.fenced} fenced; "
            f"{self.batches} batch(es) in {ran_s:.1f}s, {self.paused_s:.1f}s paused"
        )
        stages = str(self.stages)
        return f"{line}; time by stage: {stages}" if stages else line


TroubleListener = Callable[[str | None, float | None], Awaitable[None]]
"""Hears why a worker cannot go on (and when it tries again), and `None` once it can."""
