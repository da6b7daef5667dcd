"""NATS mechanics on a real server: stream create and upgrade, durable pull consumers, the embedded server."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy

from eventloom.bus import consumer as consumer_module
from eventloom.bus import stream as stream_module
from eventloom.bus.connection import connect
from eventloom.bus.consumer import ConsumerSpec, DurableConsumer, _PullInbox, read_stream
from eventloom.bus.embedded import EmbeddedNats
from eventloom.bus.stream import ensure_stream, jetstream_api, partition_of
from eventloom.errors import BusUnavailableError
from eventloom.log import EventLog
from eventloom.settings import Settings
from tests.conftest import NatsServer

pytestmark = pytest.mark.anyio


async def test_stream_creation_is_idempotent_and_keeps_its_partitions(nats_server: NatsServer) -> None:
    client = await connect(nats_server.url)
    try:
        first = await ensure_stream(client, Settings(partitions=8))
        again = await ensure_stream(client, Settings(partitions=8))
        asked_for_more = await ensure_stream(client, Settings(partitions=32))
        info = await jetstream_api(client, "STREAM.INFO.EVENTLOOM")
    finally:
        await client.close()
    assert first == again == asked_for_more
    assert first.partitions == 8 and first.atomic_batches
    assert info["config"]["subjects"] == [f"eventloom.{p}.*" for p in range(8)]
    assert info["config"]["metadata"]["eventloom.partitions"] == "8"
    assert info["config"]["storage"] == "file" and info["config"]["deny_delete"] is True


async def test_stream_upgrade_changes_config_in_place(nats_server: NatsServer) -> None:
    client = await connect(nats_server.url)
    try:
        await ensure_stream(client, Settings(duplicate_window_s=120))
        await client.jetstream().publish("eventloom.0.x", b"{}")
        await ensure_stream(client, Settings(duplicate_window_s=30))
        info = await jetstream_api(client, "STREAM.INFO.EVENTLOOM")
    finally:
        await client.close()
    assert info["config"]["duplicate_window"] == 30 * 1_000_000_000
    assert info["state"]["messages"] == 1


def test_partition_is_a_stable_function_of_the_session() -> None:
    assert partition_of("alpha", 16) == int("8ed3f6ad", 16) % 16  # sha256("alpha")[:8]
    assert {partition_of(f"s{i}", 16) for i in range(200)} == set(range(16))


async def test_durable_consumer_fetches_acks_redelivers_and_replays(log: EventLog) -> None:
    await log.append_many([])
    for n in range(10):
        await log.append(f"s{n % 2}", "note.added", "t", {"n": n})
    spec = ConsumerSpec(
        durable="probe", filter_subjects=log.layout.partition_subjects(), ack_wait_s=1.0, max_deliver=3
    )
    consumer = DurableConsumer(log.client, log.layout.name, spec)
    await consumer.open()
    first = await consumer.fetch(4, timeout=2)
    assert len(first) == 4
    for message in first[:3]:
        await message.ack()
    await first[3].nak()
    rest: list[Msg] = []
    while len(rest) < 7:
        batch = await consumer.fetch(100, timeout=2)
        assert batch, "messages were not redelivered"
        rest.extend(batch)
    by_seq = {m.metadata.sequence.stream: m for m in rest}
    assert sorted(by_seq) == list(range(4, 11))
    assert by_seq[4].metadata.num_delivered == 2  # the nak'd message came back
    for message in by_seq.values():
        await message.ack()
    assert await consumer.fetch(10, timeout=0.3) == []  # the empty-fetch timeout is absorbed
    await consumer.close()

    replay = DurableConsumer(
        log.client,
        log.layout.name,
        ConsumerSpec(
            durable="replay",
            filter_subjects=log.layout.partition_subjects(),
            start_stream_seq=7,
            ack_policy=AckPolicy.ALL,
        ),
    )
    await replay.open()
    assert [m.metadata.sequence.stream for m in await replay.fetch(100, timeout=2)] == [7, 8, 9, 10]
    await replay.close()


async def test_a_lingering_fetch_gathers_a_trickle_into_one_batch(log: EventLog) -> None:
    def consumer(name: str) -> DurableConsumer:
        spec = ConsumerSpec(durable=name, filter_subjects=log.layout.partition_subjects())
        return DurableConsumer(log.client, log.layout.name, spec)

    eager, patient = consumer("eager"), consumer("patient")
    await eager.open()
    await patient.open()

    async def trickle() -> None:
        for n in range(6):
            await log.append("s", "note.added", "t", {"n": n})
            await asyncio.sleep(0.05)

    appending = asyncio.create_task(trickle())
    first_eager, gathered = await asyncio.gather(
        eager.fetch(100, timeout=2), patient.fetch(100, timeout=2, linger_s=2.0)
    )
    await appending
    assert 1 <= len(first_eager) < 6  # what had come when the first event did
    assert [m.metadata.sequence.stream for m in gathered] == [1, 2, 3, 4, 5, 6]

    # a full batch does not wait out the linger, and nothing to fetch is not lingered on
    for n in range(5):
        await log.append("s", "note.added", "t", {"n": 6 + n})
    full = await asyncio.wait_for(eager.fetch(3, timeout=2, linger_s=60.0), timeout=10)
    assert len(full) == 3
    # a pull the linger left open may still be delivering the five, so drain until all have come
    drained: list[int] = []
    async with asyncio.timeout(10):
        while len(drained) < 5:
            for message in await patient.fetch(10, timeout=2):
                drained.append(message.metadata.sequence.stream)
                await message.ack()
    assert drained == [7, 8, 9, 10, 11]
    assert await asyncio.wait_for(patient.fetch(10, timeout=0.3, linger_s=60.0), timeout=10) == []
    await eager.close()
    await patient.close()


async def test_unacked_messages_come_back_after_ack_wait(log: EventLog) -> None:
    await log.append("s", "note.added", "t", {})
    spec = ConsumerSpec(durable="slow", filter_subjects=log.layout.partition_subjects(), ack_wait_s=0.5)
    consumer = DurableConsumer(log.client, log.layout.name, spec)
    await consumer.open()
    (message,) = await consumer.fetch(1, timeout=2)
    await asyncio.sleep(0.8)
    (again,) = await consumer.fetch(1, timeout=2)
    assert again.metadata.sequence.stream == message.metadata.sequence.stream
    assert again.metadata.num_delivered == 2
    await consumer.close()


async def test_read_stream_reads_from_a_stream_sequence_and_leaves_nothing_behind(log: EventLog) -> None:
    for n in range(6):
        await log.append("s", "note.added", "t", {"n": n})
    seen = [
        m.metadata.sequence.stream
        async for m in read_stream(log.client, "EVENTLOOM", ["eventloom.*.*"], start_stream_seq=3)
    ]
    assert seen == [3, 4, 5, 6]
    info = await jetstream_api(log.client, "CONSUMER.LIST.EVENTLOOM")
    assert not info.get("consumers")


async def test_read_stream_does_not_end_short_when_a_fetch_comes_back_empty(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch with nothing in it while messages are still due (a consumer on a replica catching up) is
    not the end of the stream: a verify or a repair reading too little would report (or re-publish) what
    is there."""
    for n in range(6):
        await log.append("s", "note.added", "t", {"n": n})
    fetch, empty_fetches = _PullInbox.fetch, [0]

    async def empty_after_two(self: _PullInbox, batch: int, timeout: float) -> list[Msg]:
        if self._request >= 2 and empty_fetches[0] < 2:
            empty_fetches[0] += 1
            return []
        return await fetch(self, 2, timeout)  # two at a time, so the empty ones come mid-read

    monkeypatch.setattr(_PullInbox, "fetch", empty_after_two)
    seen = [m.metadata.sequence.stream async for m in read_stream(log.client, "EVENTLOOM", ["eventloom.*.*"])]
    assert seen == [1, 2, 3, 4, 5, 6] and empty_fetches == [2]


async def test_read_stream_that_stalls_fails_naming_the_stream(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(3):
        await log.append("s", "note.added", "t", {"n": n})

    async def nothing(self: _PullInbox, batch: int, timeout: float) -> list[Msg]:
        return []

    monkeypatch.setattr(_PullInbox, "fetch", nothing)
    monkeypatch.setattr(consumer_module, "_STALL_LIMIT_S", 0.2)
    with pytest.raises(
        BusUnavailableError, match=r"stream EVENTLOOM: the read delivered nothing .* 3 messages"
    ):
        async for _ in read_stream(log.client, "EVENTLOOM", ["eventloom.*.*"], idle_timeout=0.05):
            pass


async def test_embedded_server_reuses_its_port_and_restarts_when_killed(tmp_path: Path) -> None:
    embedded = EmbeddedNats(tmp_path / "nats")
    url = await embedded.start()
    try:
        settings = Settings(data_dir=tmp_path / "data", nats_url=url)
        async with await EventLog.open(settings) as log:
            before = await log.append("s", "note.added", "t", {"n": 1})
            assert embedded.pid is not None
            os.kill(embedded.pid, signal.SIGKILL)
            after = None
            for _ in range(100):  # the client reconnects to the restarted server on the same port
                try:
                    after = await log.append("s", "note.added", "t", {"n": 2})
                    break
                except Exception:
                    await asyncio.sleep(0.1)
            assert after is not None and after.seq == 2 and after.prev_hash == before.hash
            assert embedded.restarts == 1 and embedded.url == url
    finally:
        await embedded.stop()
    second = EmbeddedNats(tmp_path / "nats")
    assert await second.start() == url  # remembered in <data>/nats/port
    await second.stop()
    assert "127.0.0.1" in (tmp_path / "nats" / "nats.conf").read_text()


async def test_stream_info_asks_again_while_the_stream_elects_a_leader(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 "JetStream system temporarily unavailable" answer (a failover) is asked again, not taken for
    the stream's answer ("stream EVENTLOOM: ... nothing appended yet?")."""
    ask, answers = stream_module.jetstream_api, [0]

    async def electing_once(*args: Any, **kwargs: Any) -> dict[str, Any]:
        answers[0] += 1
        if answers[0] == 1:
            return {"error": {"code": 503, "err_code": 10008, "description": "temporarily unavailable"}}
        return await ask(*args, **kwargs)

    monkeypatch.setattr(stream_module, "jetstream_api", electing_once)
    layout = await stream_module.describe_stream(log.client, "EVENTLOOM")
    assert answers == [2] and layout.partitions == log.layout.partitions


async def test_read_stream_makes_a_consumer_again_that_counts_fewer_messages_than_the_leader(
    log: EventLog, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A consumer on a replica that lacks messages (after store damage it says it is current a moment too
    soon) counts fewer than the stream's leader: it is made again instead of read short."""
    for n in range(4):
        await log.append("s", "note.added", "t", {"n": n})
    counts, asked = stream_module.subject_counts, [0]

    async def one_more_at_first(client: Any, stream: str, subject: str) -> dict[str, int]:
        asked[0] += 1
        found = await counts(client, stream, subject)
        return {**found, "eventloom.lost.x": 1} if asked[0] == 1 else found

    monkeypatch.setattr(consumer_module, "subject_counts", one_more_at_first)
    seen = [m.metadata.sequence.stream async for m in read_stream(log.client, "EVENTLOOM", ["eventloom.*.*"])]
    assert seen == [1, 2, 3, 4] and asked == [2]
    assert "counts 4 of the leader's 5 messages" in caplog.text
    info = await jetstream_api(log.client, "CONSUMER.LIST.EVENTLOOM")
    assert not info.get("consumers")  # the first one was deleted, not left to expire
