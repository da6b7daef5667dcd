"""A graph projector worker that kills itself (SIGKILL) right after its Nth batch is written, before that
batch is acknowledged: the worst moment for exactly-once. Run by tests/test_batched_projection.py as
`python -m tests.crash_projector KILL_AFTER_BATCHES BATCH` with the settings in `EVENTLOOM_*` variables."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.plugins import load_projector
from projectors.runner import ProjectorRunner, RunnerOptions

ACK_WAIT_S = 2.0
"""What the dead worker held comes back this soon (the test's resumed worker uses the same)."""


async def main(settings: Settings, kill_after: int, batch: int) -> None:
    log = await EventLog.open(settings)
    projector = load_projector("graph", settings)
    written = 0
    apply = projector.apply

    async def apply_then_maybe_die(events: Sequence[Event]) -> None:
        nonlocal written
        await apply(events)
        written += 1
        if written == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # committed, not acknowledged

    projector.apply = apply_then_maybe_die  # type: ignore[method-assign]
    options = RunnerOptions(batch=batch, fetch_timeout_s=0.2, ack_wait_s=ACK_WAIT_S)
    keys = KeyStore(settings.data_dir)
    runner = ProjectorRunner(log.client, log.layout, projector, options=options, keys=keys)
    await runner.run(asyncio.Event())  # runs until killed


if __name__ == "__main__":
    asyncio.run(main(Settings.from_env(), int(sys.argv[1]), int(sys.argv[2])))
