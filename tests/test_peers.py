"""Peer status (issue 22, part B): the pure table's rules, the watcher's tolerance of junk, and heartbeats
through a real nats-server (subject and KV bucket) read back by `read_peers`."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

import msgspec
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from eventloom.bus import Heartbeat, HeartbeatPublisher, PeerTable, PeerWatcher, read_peers
from eventloom.bus.connection import connect
from eventloom.bus.heartbeat import new_peer_id
from eventloom.bus.peers import PEERS_SUBJECT_ROOT
from eventloom.settings import Settings

pytestmark = pytest.mark.anyio


def beat(peer_id: str = "node-h-1-abc", seq: int = 1, role: str = "node") -> Heartbeat:
    return Heartbeat(
        id=peer_id,
        role=role,
        heartbeat_seq=seq,
        sent_at="2026-11-26T00:00:00.000000Z",
        version="1.0.0",
        host="h",
        pid=1,
        capabilities=["projector:graph"],
    )


def test_a_peer_turns_suspect_then_dead_as_its_last_heartbeat_ages() -> None:
    table = PeerTable(suspect_after_s=3.0, dead_after_s=10.0)
    assert table.observe(beat(), seen_at=100.0)
    states = [
        (table.status("node-h-1-abc", now) or pytest.fail()).status for now in (100, 102.9, 103, 109.9, 110)
    ]
    assert states == ["alive", "alive", "suspect", "suspect", "dead"]
    assert table.statuses(105.0)[0].age_s == 5.0
    assert table.forget(now=200.0, after_s=50.0) == ["node-h-1-abc"] and len(table) == 0


def test_a_higher_seq_wins_and_an_older_one_arriving_late_is_ignored() -> None:
    table = PeerTable(suspect_after_s=3.0, dead_after_s=10.0)
    assert table.observe(beat(seq=5), seen_at=100.0)
    assert not table.observe(beat(seq=4), seen_at=108.0)  # late: changes nothing, not even the age
    assert not table.observe(beat(seq=5), seen_at=108.0)  # a duplicate
    assert (table.status("node-h-1-abc", 108.0) or pytest.fail()).status == "suspect"
    assert table.observe(beat(seq=6), seen_at=108.0)
    peer = table.status("node-h-1-abc", 108.0) or pytest.fail()
    assert (peer.status, peer.heartbeat.heartbeat_seq) == ("alive", 6)


def test_a_restart_is_a_new_peer_while_the_old_one_dies() -> None:
    first, second = new_peer_id("projector"), new_peer_id("projector")
    assert first != second and first.startswith("projector-")
    table = PeerTable(suspect_after_s=3.0, dead_after_s=10.0)
    table.observe(beat(first, seq=900), seen_at=0.0)
    table.observe(beat(second, seq=1), seen_at=9.0)  # seq starts over: a different id, so it counts
    assert {p.heartbeat.id: p.status for p in table.statuses(10.0)} == {first: "dead", second: "alive"}


def test_settings_refuse_peer_times_that_make_no_sense(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"heartbeat_interval_s: must be more than 0.*HEARTBEAT_INTERVAL_S"):
        Settings(heartbeat_interval_s=0)
    with pytest.raises(ValueError, match=r"peer_suspect_after_s: must be more than the heartbeat interval"):
        Settings(peer_suspect_after_s=30.0, peer_dead_after_s=20.0)
    monkeypatch.setenv("EVENTLOOM_PEER_DEAD_AFTER_S", "soon")
    with pytest.raises(ValueError, match="EVENTLOOM_PEER_DEAD_AFTER_S: expected a number of seconds"):
        Settings.from_env()
    monkeypatch.delenv("EVENTLOOM_PEER_DEAD_AFTER_S")
    monkeypatch.setenv("EVENTLOOM_HEARTBEAT_INTERVAL_S", "0.5")
    scaled = Settings.from_env()  # the peer times default to 3 and 10 intervals
    assert (scaled.peer_suspect_after_s, scaled.peer_dead_after_s) == (1.5, 5.0)
    assert Settings.from_env().to_env()["EVENTLOOM_PEER_DEAD_AFTER_S"] == "5.0"  # reaches child processes


@hypothesis_settings(max_examples=200, deadline=None)
@given(data=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_whatever_arrives_on_the_subject_never_crashes_the_watcher(data: bytes) -> None:
    watcher = PeerWatcher(None, Settings(), clock=lambda: 0.0)  # type: ignore[arg-type]
    watcher.receive(data)  # junk is ignored (and counted), never raised
    watcher.check()
    assert len(watcher.table) + watcher.ignored <= 1


def test_a_bad_heartbeat_is_ignored_with_a_log(caplog: pytest.LogCaptureFixture) -> None:
    watcher = PeerWatcher(None, Settings(), clock=lambda: 0.0)  # type: ignore[arg-type]
    bad_id = msgspec.json.encode(beat()).replace(b'"node-h-1-abc"', b'"no.dots.here"')
    with caplog.at_level(logging.WARNING):
        assert not watcher.receive(bad_id)
        assert not watcher.receive(b'{"id": "x"}')
    assert watcher.ignored == 2 and len(watcher.table) == 0
    assert "not a heartbeat" in caplog.text and "$.id" in caplog.text
    assert watcher.receive(msgspec.json.encode(beat())) and len(watcher.table) == 1


async def test_heartbeats_reach_the_bucket_and_the_watchers_and_a_clean_stop_leaves(
    settings: Settings,
) -> None:
    settings = replace(settings, heartbeat_interval_s=0.1, peer_suspect_after_s=0.5, peer_dead_after_s=1.0)
    assert settings.nats_url is not None
    client = await connect(settings.nats_url, name="test-peers")
    try:
        assert await read_peers(client, settings) == []  # no bucket yet
        watcher = PeerWatcher(client, settings)
        lags = {"projector-graph": 7}

        async def lag() -> dict[str, int]:
            return lags

        gateway = HeartbeatPublisher(
            client, settings, role="gateway-http", capabilities=["mcp-http"], urls=["http://127.0.0.1:1/mcp"]
        )
        worker = HeartbeatPublisher(
            client, settings, role="projector", capabilities=["projector:graph"], lag=lag
        )
        async with watcher.running(), worker.running():
            async with gateway.running():
                await _until(lambda: len(watcher.peers()) == 2)
                peers = await read_peers(client, settings)
                assert [(p.heartbeat.role, p.status) for p in peers] == [
                    ("gateway-http", "alive"),
                    ("projector", "alive"),
                ]
                assert (
                    peers[0].heartbeat.urls == ["http://127.0.0.1:1/mcp"] and peers[0].heartbeat.lag is None
                )
                assert peers[1].heartbeat.lag == {"projector-graph": 7}
                assert peers[1].flat()["capabilities"] == ["projector:graph"] and peers[1].age_s < 0.5
            await _until(lambda: any(p.status == "suspect" for p in watcher.peers()))  # it stopped
            assert [p.heartbeat.role for p in await read_peers(client, settings)] == ["projector"]  # it left
            seq = worker.sent
            await _until(lambda: worker.sent > seq + 2)
            [latest] = await read_peers(client, settings)
            assert latest.heartbeat.heartbeat_seq > seq + 2  # the bucket holds the newest
    finally:
        await client.close()


async def test_a_publisher_whose_connection_is_gone_keeps_its_process_up(settings: Settings) -> None:
    settings = replace(settings, heartbeat_interval_s=0.05, peer_suspect_after_s=0.5, peer_dead_after_s=1.0)
    assert settings.nats_url is not None
    client = await connect(settings.nats_url, name="test-peers", persistent=False)
    await client.close()
    publisher = HeartbeatPublisher(client, settings, role="query")
    assert not await publisher.publish_once()
    async with publisher.running():
        await _until(lambda: publisher.sent >= 3)  # it goes on ticking, failing quietly


async def _until(condition: object, timeout: float = 10.0) -> None:
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_the_subject_root_is_outside_the_event_stream() -> None:
    assert not PEERS_SUBJECT_ROOT.startswith("eventloom.")
