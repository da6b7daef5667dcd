"""Rebuilding a read model: replay the stream from sequence 1 into a new generation, then swap it in.

The live projector keeps serving the old generation until the swap; afterwards it reopens on the new one
and continues from the stream sequence the rebuild recorded (see `ProjectorRunner._follow_swap`).

A read model without generations (the keyword and vector models on Neo4j, whose one database the graph
shares) is rebuilt in place instead: cleared, then replayed into. Its live projector must be stopped
meanwhile: it would otherwise write checkpoints past events the replay has yet to apply, and the replay
would skip them.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import msgspec
import nats.js.errors

from eventloom.errors import EventloomError
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from projectors.plugins import load_projector
from projectors.protocol import Projector, Rebuildable
from projectors.runner import ProjectorRunner, RunnerOptions


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    projector: str
    generation: int
    """The generation built (0 when rebuilt in place)."""
    events: int
    seconds: float
    events_per_s: float
    resume_stream_seq: int
    in_place: bool = False


@runtime_checkable
class RebuiltInPlace(Projector, Protocol):
    """A projector whose read model has no generations: a rebuild clears it, then replays the log into it."""

    async def clear(self) -> None:
        """Delete the read model's contents and checkpoints (called between `open` and `close`)."""
        ...


async def rebuild(
    log: EventLog, name: str, *, batch: int = 5000, progress: Callable[[int, int], None] | None = None
) -> RebuildReport:
    """Build `name`'s read model afresh; `progress(done, total)` is called as stream sequences are applied."""
    live = load_projector(name, log.settings)
    if isinstance(live, RebuiltInPlace):
        return await rebuild_in_place(log, live, batch=batch, progress=progress)
    if not isinstance(live, Rebuildable):
        raise EventloomError(f"projector {name!r} does not support rebuilds into a new generation")
    generations = live.generations
    target = await asyncio.to_thread(generations.next)
    number = int(target.name.removeprefix("gen-"))
    fresh = load_projector(name, log.settings, generation=target)
    try:
        applied, seconds, resume = await _replay_into(
            log, fresh, f"rebuild-{name}-gen{number}", batch, progress
        )
    except BaseException:
        await asyncio.to_thread(shutil.rmtree, target, True)  # never swapped in: nothing points at it
        raise
    await asyncio.to_thread(generations.swap, target, resume)
    await asyncio.to_thread(generations.prune)
    return _report(name, number, applied, seconds, resume)


async def rebuild_in_place(
    log: EventLog,
    projector: RebuiltInPlace,
    *,
    batch: int = 5000,
    progress: Callable[[int, int], None] | None = None,
) -> RebuildReport:
    """Clear `projector`'s read model, then replay the stream from sequence 1 into it."""
    await projector.open()
    try:
        await projector.clear()
    finally:
        await projector.close()
    consumer = f"rebuild-{projector.name}-in-place"
    applied, seconds, resume = await _replay_into(log, projector, consumer, batch, progress)
    return _report(projector.name, 0, applied, seconds, resume, in_place=True)


async def _replay_into(
    log: EventLog,
    projector: Projector,
    consumer: str,
    batch: int,
    progress: Callable[[int, int], None] | None,
) -> tuple[int, float, int]:
    """Replay the stream into `projector` through a consumer of its own, deleted after (and before: one
    left by an interrupted rebuild starts over). Returns events applied, seconds, the next stream seq."""
    js = log.client.jetstream()
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await js.delete_consumer(log.layout.name, consumer)
    runner = ProjectorRunner(
        log.client,
        log.layout,
        projector,
        role="rebuild",
        consumer=consumer,
        options=RunnerOptions(batch=batch, fetch_timeout_s=0.5, max_deliver=3),
        keys=KeyStore(log.settings.data_dir),
    )
    total = int((await js.stream_info(log.layout.name)).state.last_seq)
    started = time.perf_counter()
    try:
        await replay_stream(log, runner, total, progress)
        seconds = time.perf_counter() - started
        info = await js.consumer_info(log.layout.name, consumer)
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_consumer(log.layout.name, consumer)
    return runner.stats.applied, seconds, int(info.ack_floor.stream_seq or 0) + 1


def _report(
    name: str, generation: int, applied: int, seconds: float, resume: int, *, in_place: bool = False
) -> RebuildReport:
    return RebuildReport(
        projector=name,
        generation=generation,
        events=applied,
        seconds=round(seconds, 3),
        events_per_s=round(applied / seconds, 1) if seconds else 0.0,
        resume_stream_seq=resume,
        in_place=in_place,
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
