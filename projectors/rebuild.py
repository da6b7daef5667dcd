"""Rebuilding a read model: replay the stream from sequence 1 into a new generation, then swap it in.

The live projector keeps serving the old generation until the swap; afterwards it reopens on the new one
and continues from the stream sequence the rebuild recorded (see `ProjectorRunner._follow_swap`).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable

import msgspec
import nats.js.errors

from eventloom.errors import EventloomError
from eventloom.log import EventLog
from projectors.plugins import load_projector
from projectors.protocol import Rebuildable
from projectors.runtime import ProjectorRunner, RunnerOptions


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    projector: str
    generation: int
    events: int
    seconds: float
    events_per_s: float
    resume_stream_seq: int


async def rebuild(
    log: EventLog, name: str, *, batch: int = 5000, progress: Callable[[int, int], None] | None = None
) -> RebuildReport:
    """Build `name`'s read model afresh; `progress(done, total)` is called as stream sequences are applied."""
    live = load_projector(name, log.settings)
    if not isinstance(live, Rebuildable):
        raise EventloomError(f"projector {name!r} does not support rebuilds into a new generation")
    generations = live.generations
    target = await asyncio.to_thread(generations.next)
    number = int(target.name.removeprefix("gen-"))
    fresh = load_projector(name, log.settings, generation=target)
    consumer = f"rebuild-{name}-gen{number}"
    js = log.client.jetstream()
    with contextlib.suppress(nats.js.errors.NotFoundError):  # left by an interrupted rebuild: start over
        await js.delete_consumer(log.layout.name, consumer)
    runner = ProjectorRunner(
        log.client,
        log.layout,
        fresh,
        role="rebuild",
        consumer=consumer,
        options=RunnerOptions(batch=batch, fetch_timeout_s=0.5, max_deliver=3),
    )
    total = int((await js.stream_info(log.layout.name)).state.last_seq)
    started = time.perf_counter()
    try:
        await replay_stream(log, runner, total, progress)
    except BaseException:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_consumer(log.layout.name, consumer)
        await asyncio.to_thread(shutil.rmtree, target, True)  # never swapped in: nothing points at it
        raise
    seconds = time.perf_counter() - started
    info = await js.consumer_info(log.layout.name, consumer)
    resume = int(info.ack_floor.stream_seq or 0) + 1
    await asyncio.to_thread(generations.swap, target, resume)
    await js.delete_consumer(log.layout.name, consumer)
    await asyncio.to_thread(generations.prune)
    applied = runner.stats.applied
    return RebuildReport(
        projector=name,
        generation=number,
        events=applied,
        seconds=round(seconds, 3),
        events_per_s=round(applied / seconds, 1) if seconds else 0.0,
        resume_stream_seq=resume,
    )


async def replay_stream(
    log: EventLog, runner: ProjectorRunner, total: int, progress: Callable[[int, int], None] | None
) -> None:
    """Run `runner` until it has applied the stream up to `total`, then stop it (closing its projector)."""
    js = log.client.jetstream()
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.ready.wait(), 60)
        while True:
            if task.done():
                task.result()
            info = await js.consumer_info(log.layout.name, runner.consumer)
            done = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
            if progress is not None:
                progress(min(done, total), total)
            if not info.num_pending and not info.num_ack_pending and done >= total:
                break
            await asyncio.sleep(0.1)
    finally:
        stop.set()
        await task
