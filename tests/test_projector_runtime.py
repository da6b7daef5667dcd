"""The consumer runtime with a real third-party plug-in installed through its entry points."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from eventloom.bus.stream import DLQ_STREAM, jetstream_api
from eventloom.dlq import dead_letter_counts, list_dead_letters, request_retry
from eventloom.errors import ReadModelUnavailableError
from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.emitter import ProducerProjection
from projectors.partitions import parse_partitions
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available, load_producer, load_projector
from projectors.protocol import Projector
from projectors.runner import ProjectorRunner, RunnerOptions
from tests.runtime_support import FAST, drained, install_plugin, running

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="session", autouse=True)
def sample_plugin() -> Iterator[None]:
    install_plugin()
    yield


def counts(settings: Settings, name: str = "type-counts") -> dict[tuple[str, str], int]:
    path = settings.data_dir / "readmodels" / name / "counts.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {(s, t): n for s, t, n in db.execute("SELECT session, type, n FROM counts")}


async def append_notes(log: EventLog, sessions: int, per_session: int, type: str = "note.added") -> None:
    await log.append_many(
        [
            AppendRequest(session=f"s{n % sessions}", type=type, actor="t", payload={"n": n})
            for n in range(sessions * per_session)
        ]
    )


def test_the_sample_plugin_is_found_through_its_entry_points(settings: Settings) -> None:
    assert "type-counts" in available(PROJECTORS_GROUP)
    assert "echo" in available(PRODUCERS_GROUP)
    assert isinstance(load_projector("type-counts", settings), Projector)
    assert load_producer("echo", settings).name == "echo"


async def test_plugin_projector_runs_survives_restart_and_redelivery_without_double_effects(
    log: EventLog, settings: Settings
) -> None:
    await append_notes(log, sessions=3, per_session=20)
    async with running(log, load_projector("type-counts", settings)) as runner:
        await drained(log, runner.consumer)
    assert counts(settings) == {(f"s{i}", "note.added"): 20 for i in range(3)}

    await append_notes(log, sessions=3, per_session=5)
    async with running(log, load_projector("type-counts", settings)) as runner:  # a restart picks up the rest
        await drained(log, runner.consumer)
    assert counts(settings) == {(f"s{i}", "note.added"): 25 for i in range(3)}

    await log.client.jetstream().delete_consumer(
        log.layout.name, runner.consumer
    )  # everything is redelivered
    async with running(log, load_projector("type-counts", settings)) as runner:
        await drained(log, runner.consumer)
        assert runner.stats.skipped == 75 and runner.stats.applied == 0
    assert counts(settings) == {(f"s{i}", "note.added"): 25 for i in range(3)}


async def test_plugin_projector_rebuilds_from_stream_sequence_one(
    log: EventLog, settings: Settings, tmp_path: Path
) -> None:
    await append_notes(log, sessions=2, per_session=10)
    async with running(log, load_projector("type-counts", settings)) as runner:
        await drained(log, runner.consumer)
    before = counts(settings)
    rebuilt = Settings(data_dir=tmp_path / "rebuilt", nats_url=settings.nats_url)
    fresh = load_projector("type-counts", rebuilt)
    async with running(log, fresh, role="rebuild") as runner:
        await drained(log, runner.consumer)
    assert counts(rebuilt) == before


async def test_a_failing_event_is_retried_then_dead_lettered_and_its_session_goes_on(
    log: EventLog, settings: Settings
) -> None:
    await log.append("s0", "note.added", "t", {"n": 0})
    await log.append("s0", "note.added", "t", {"explode": True})
    await log.append("s0", "note.added", "t", {"n": 2})
    await log.append("s1", "note.added", "t", {"n": 3})
    async with running(log, load_projector("type-counts", settings)) as runner:
        await drained(log, runner.consumer)
        assert runner.stats.dead_lettered == 1
    (letter,) = await list_dead_letters(log.client, runner.consumer)
    assert (letter.session, letter.seq, letter.attempts) == ("s0", 2, 3)
    assert "asked to explode" in letter.error and letter.consumer == "projector-type-counts"
    assert counts(settings) == {("s0", "note.added"): 2, ("s1", "note.added"): 1}


async def test_disjoint_partition_workers_project_everything_exactly_once(
    log: EventLog, settings: Settings
) -> None:
    await append_notes(log, sessions=12, per_session=6)
    low, high = parse_partitions("0-7", 16), parse_partitions("8-15", 16)
    async with (
        running(log, load_projector("type-counts", settings), partitions=low) as first,
        running(log, load_projector("type-counts", settings), partitions=high) as second,
    ):
        await drained(log, first.consumer)
        await drained(log, second.consumer)
    assert first.consumer == "projector-type-counts-p0-7"
    assert first.stats.applied + second.stats.applied == 72
    assert first.stats.applied > 0 and second.stats.applied > 0
    assert counts(settings) == {(f"s{i}", "note.added"): 6 for i in range(12)}


async def test_graceful_stop_finishes_and_acknowledges_the_batch_in_hand(
    log: EventLog, settings: Settings
) -> None:
    await append_notes(log, sessions=2, per_session=100)
    async with running(log, load_projector("type-counts", settings)) as runner:
        while runner.stats.applied == 0:
            await asyncio.sleep(0.01)
    js = log.client.jetstream()
    for _ in range(100):  # the server books acks asynchronously: give it a moment
        if not (await js.consumer_info(log.layout.name, runner.consumer)).num_ack_pending:
            break
        await asyncio.sleep(0.05)
    assert (await js.consumer_info(log.layout.name, runner.consumer)).num_ack_pending == 0
    assert sum(counts(settings).values()) == runner.stats.applied


async def test_producer_emits_each_derivation_once_even_after_redelivery(
    log: EventLog, settings: Settings
) -> None:
    await log.append("s0", "sample.ping", "t", {"text": "hello"})
    await log.append("s0", "note.added", "t", {})
    projection = ProducerProjection(load_producer("echo", settings), log)
    async with running(log, projection, role="producer") as runner:
        await drained(log, runner.consumer)
    await log.client.jetstream().delete_consumer(log.layout.name, runner.consumer)
    async with running(
        log, ProducerProjection(load_producer("echo", settings), log), role="producer"
    ) as runner:
        await drained(log, runner.consumer)
    echoed = [e async for e in log.events("s0") if e.type == "sample.echoed"]
    assert len(echoed) == 1
    assert echoed[0].payload == {"echo_of": 1, "text": "hello"} and echoed[0].actor == "producer:echo"
    ping, *_ = [e async for e in log.events("s0")]
    assert echoed[0].caused_by == [ping.hash]


async def test_a_crash_between_append_and_fence_never_duplicates_even_after_the_dedup_window(
    tmp_path: Path, nats_server: object
) -> None:
    settings = Settings(data_dir=tmp_path / "d", nats_url=nats_server.url, duplicate_window_s=1)  # type: ignore[attr-defined]
    async with await EventLog.open(settings) as log:
        await log.append("s0", "sample.ping", "t", {"text": "once"})
        crashing = ProducerProjection(load_producer("echo", settings), log)
        await crashing.open()
        assert crashing._fences is not None
        real_put = crashing._fences.put

        async def crash_on_done(key: str, value: bytes) -> int:
            if value.startswith(b"done:"):
                raise SystemExit("killed between publish and fence")  # the process dies here
            return await real_put(key, value)

        crashing._fences.put = crash_on_done  # type: ignore[method-assign,assignment]
        ping, *_ = [e async for e in log.events("s0")]
        with pytest.raises(SystemExit):
            await crashing.apply([ping])
        await asyncio.sleep(1.5)  # past the stream's duplicate window
        restarted = ProducerProjection(load_producer("echo", settings), log)
        async with running(log, restarted, role="producer") as runner:
            await drained(log, runner.consumer)
        echoed = [e async for e in log.events("s0") if e.type == "sample.echoed"]
        assert len(echoed) == 1, "the derived event was emitted twice"


async def test_dlq_retry_applies_the_event_once_the_projector_is_fixed(
    log: EventLog, settings: Settings
) -> None:
    await log.append("s0", "note.added", "t", {"explode": True})
    options = RunnerOptions(
        batch=50, max_deliver=2, backoff_s=(0.05,), fetch_timeout_s=0.2, retry_check_s=0.1
    )
    projector = load_projector("type-counts", settings)
    runner = ProjectorRunner(
        log.client, log.layout, projector, options=options, keys=KeyStore(settings.data_dir)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.ready.wait(), 15)
        await drained(log, runner.consumer)
        assert runner.stats.dead_lettered == 1
        (settings.data_dir / "readmodels" / "type-counts" / "accept-explosions").touch()  # the fix ships
        assert await request_retry(log.client, runner.consumer) == 1
        while runner.stats.retried == 0:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await task
    assert await list_dead_letters(log.client, runner.consumer) == []
    assert await dead_letter_counts(log.client) == {runner.consumer: 0}
    dlq = await jetstream_api(log.client, f"STREAM.INFO.{DLQ_STREAM}")
    assert dlq["state"]["messages"] == 2  # the letter stays (workers delete nothing), resolved after it
    assert counts(settings) == {("s0", "note.added"): 1}


async def test_a_restart_while_an_event_waits_for_retry_keeps_its_session_in_order(
    log: EventLog, settings: Settings
) -> None:
    await log.append("s0", "note.added", "t", {"n": 1})
    await log.append("s0", "note.added", "t", {"explode": True})
    await log.append("s0", "note.added", "t", {"n": 3})
    patient = RunnerOptions(batch=50, max_deliver=10, backoff_s=(1.0,), fetch_timeout_s=0.2)
    first = ProjectorRunner(
        log.client,
        log.layout,
        load_projector("type-counts", settings),
        options=patient,
        keys=KeyStore(settings.data_dir),
    )
    stop = asyncio.Event()
    task = asyncio.create_task(first.run(stop))
    await asyncio.wait_for(first.ready.wait(), 15)
    while first.stats.applied == 0:  # seq 1 applied, seq 2 failed and waits for its redelivery
        await asyncio.sleep(0.02)
    stop.set()
    await task
    (settings.data_dir / "readmodels" / "type-counts" / "accept-explosions").touch()
    async with running(log, load_projector("type-counts", settings)) as second:
        await drained(log, second.consumer)
    assert counts(settings) == {("s0", "note.added"): 3}, "seq 3 overtook seq 2 and seq 2 was skipped"


class _StoreGoesDown:
    """A plug-in projector whose store answered at open and is down by the first batch (a database that
    went away): each apply says unavailable, as the built-in Neo4j stores do."""

    def __init__(self, inner: Projector) -> None:
        self.name = inner.name
        self._inner = inner

    async def open(self) -> None:
        await self._inner.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self._inner.applied_seqs(sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        raise ReadModelUnavailableError(f"the counts store is down ({len(events)} events waiting)")

    async def close(self) -> None:
        await self._inner.close()


async def test_a_worker_told_to_stop_while_its_store_is_down_stops_at_once_and_acknowledges_nothing(
    log: EventLog, settings: Settings
) -> None:
    await append_notes(log, sessions=1, per_session=5)
    heard: list[str | None] = []

    async def on_trouble(trouble: str | None, retry_in_s: float | None) -> None:
        heard.append(trouble)

    waits_long = dataclasses.replace(FAST, unavailable_retry_s=(600.0,))
    down = _StoreGoesDown(load_projector("type-counts", settings))
    runner = ProjectorRunner(
        log.client,
        log.layout,
        down,
        options=waits_long,
        keys=KeyStore(settings.data_dir),
        on_trouble=on_trouble,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    while not heard:
        await asyncio.sleep(0.02)
    assert heard[0] is not None and "the counts store is down" in heard[0]
    stop.set()
    await asyncio.wait_for(task, 10)  # not the 600 s pause
    assert (runner.stats.applied, runner.stats.dead_lettered) == (0, 0)
    assert await list_dead_letters(log.client, runner.consumer) == []

    async with running(log, load_projector("type-counts", settings)) as again:
        await drained(log, again.consumer)
    assert counts(settings) == {("s0", "note.added"): 5}
