"""Replicas and a cluster you can start here (issue 23, items 1 and 2): `eventloom up --cluster 3` runs three
routed nats-servers with R3 streams and buckets, the embedded server's users and permissions on each, and
keeps acknowledging appends when one of them is killed. One cluster serves the whole file (it costs ~4 s)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import nats
import nats.errors
import pytest
from typer.testing import CliRunner

from eventloom.bus.auth import role_credentials
from eventloom.bus.buckets import bucket_replicas, ensure_bucket
from eventloom.bus.connection import connect, credentials_of, server_urls
from eventloom.bus.embedded import free_port
from eventloom.bus.stream import DLQ_STREAM, ensure_stream, jetstream_api
from eventloom.errors import EventloomError, NodeNotRunningError
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.buckets import NODE_BUCKETS
from gateway.cli import app
from tests.cluster_support import LocalCluster, cluster_settings, stream_leader, wait_replicas_current
from tests.conftest import NatsServer

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    running = LocalCluster(cluster_settings(tmp_path_factory.mktemp("cluster")))
    running.start()
    try:
        yield running
    finally:
        running.stop()


def admin_settings(cluster: LocalCluster) -> Settings:
    """What a CLI process on the node's data dir has: the admin's credentials, the runtime.json URL."""
    return replace(cluster.settings, nats_url=cluster.url, replicas=1)


@pytest.mark.slow
async def test_the_cluster_comes_up_with_every_stream_and_bucket_at_r3(cluster: LocalCluster) -> None:
    servers = cluster.servers()
    assert [s.name for s in servers] == ["nats-1", "nats-2", "nats-3"]
    assert server_urls(cluster.url) == [s.url for s in servers]
    assert len({s.pid for s in servers}) == 3 and all(s.pid for s in servers)
    assert all(Path(s.store_dir) == cluster.member_dir(s.name) / "store" for s in servers)
    secret = cluster.settings.nats_dir / "route-secret"
    assert secret.stat().st_mode & 0o777 == 0o600
    settings = admin_settings(cluster)
    client = await connect(cluster.url, persistent=False, credentials=credentials_of(settings))
    try:
        placed = await wait_replicas_current(client, settings.stream)
        assert placed["num_replicas"] == 3 and placed["leader"] in {s.name for s in servers}
        assert len(placed["replicas"]) == 2 and all(r["current"] for r in placed["replicas"])
        dlq = await jetstream_api(client, f"STREAM.INFO.{DLQ_STREAM}")
        assert dlq["config"]["num_replicas"] == 3
        for name, _ in NODE_BUCKETS:  # idempotency, peers, fences, ... created by the node at R3
            assert await bucket_replicas(client, name) == 3, name
    finally:
        await client.close()


@pytest.mark.slow
def test_the_cli_appends_reads_and_reports_replicas_through_runtime_json(cluster: LocalCluster) -> None:
    """The commands find the node's comma-separated URL list in runtime.json (in-process: no interpreter
    start-ups to pay for)."""

    def cli(*args: str) -> str:
        result = CliRunner().invoke(app, ["--data-dir", str(cluster.settings.data_dir), *args])
        assert result.exit_code == 0, result.output
        return result.output

    payload = '{"text": "on three servers"}'
    cli(
        "append",
        "--session",
        "clustered",
        "--type",
        "note.added",
        "--actor",
        "agent:test",
        "--payload",
        payload,
    )
    lines = cli("tail", "--session", "clustered", "--json").splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    assert [e["payload"]["text"] for e in events] == ["on three servers"]
    stream = json.loads(cli("status", "--json"))["stream"]
    assert stream["replicas"] == 3
    assert stream["cluster"]["leader"] in {"nats-1", "nats-2", "nats-3"}
    assert len(stream["cluster"]["peers"]) == 2


@pytest.mark.slow
async def test_every_server_refuses_anonymous_clients_and_roles_outside_their_permissions(
    cluster: LocalCluster,
) -> None:
    for server in cluster.servers():
        with pytest.raises(NodeNotRunningError, match="without credentials"):
            await connect(server.url, persistent=False)
    settings = admin_settings(cluster)
    admin = await connect(cluster.url, persistent=False, credentials=credentials_of(settings))
    try:
        leader = await stream_leader(admin, settings.stream)
    finally:
        await admin.close()
    follower = next(s for s in cluster.servers() if s.name != leader)
    credentials = role_credentials(settings.data_dir, "projector")
    assert credentials is not None
    errors: list[str] = []

    async def remember(error: Exception) -> None:
        errors.append(str(error).lower())

    client = await nats.connect(
        follower.url,
        user=credentials.user,
        password=credentials.password,
        error_cb=remember,
        allow_reconnect=False,
    )
    try:
        with pytest.raises(nats.errors.TimeoutError):
            await client.request(f"$JS.API.STREAM.DELETE.{settings.stream}", b"", timeout=1)
        await client.publish("eventloom.0.clustered", b"raw bytes past the appender")
        await client.flush()
        for _ in range(50):
            if sum("permissions violation" in e for e in errors) >= 2:
                break
            await asyncio.sleep(0.02)
        assert any("$js.api.stream.delete" in e for e in errors), errors
        assert any("eventloom.0.clustered" in e for e in errors), errors
    finally:
        await client.close()


@pytest.mark.slow
async def test_replicas_are_never_downgraded_and_too_many_fail_clearly(cluster: LocalCluster) -> None:
    settings = admin_settings(cluster)
    client = await connect(cluster.url, persistent=False, credentials=credentials_of(settings))
    try:
        await ensure_stream(client, settings)  # replicas=1 against the R3 stream
        info = await jetstream_api(client, f"STREAM.INFO.{settings.stream}")
        assert info["config"]["num_replicas"] == 3
        await ensure_bucket(client, "EVENTLOOM_IDEMPOTENCY", replicas=1)
        assert await bucket_replicas(client, "EVENTLOOM_IDEMPOTENCY") == 3
        await ensure_bucket(client, "TEST_SCALED", replicas=1, ttl=60)
        await ensure_bucket(client, "TEST_SCALED", replicas=3, ttl=5)  # another TTL is no failure
        assert await bucket_replicas(client, "TEST_SCALED") == 3
        with pytest.raises(
            EventloomError, match=r"5 replicas asked for, but NATS could not place them on the 3 servers"
        ):
            await ensure_bucket(client, "TEST_TOO_MANY", replicas=5)
    finally:
        await client.close()


@pytest.mark.slow
async def test_a_comma_list_connects_past_a_dead_server(cluster: LocalCluster) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    settings = admin_settings(cluster)
    client = await connect(f"{dead}, {cluster.url}", persistent=False, credentials=credentials_of(settings))
    try:
        assert client.is_connected
    finally:
        await client.close()
    with pytest.raises(NodeNotRunningError, match="no NATS server"):
        await connect(" , ", persistent=False)


@pytest.mark.slow
async def test_a_held_server_stays_down_until_released(cluster: LocalCluster) -> None:
    """The fault tests' way to work on a dead member's store: `<member>/hold` keeps the supervisor off."""
    settings = admin_settings(cluster)
    client = await connect(cluster.url, credentials=credentials_of(settings))  # fails over if on the victim
    try:
        leader = await stream_leader(client, settings.stream)
        follower = next(s.name for s in cluster.servers() if s.name != leader)
        old_pid = cluster.kill(follower, hold=True)
        await asyncio.sleep(1.0)  # the supervisor would have restarted it within 0.2 s
        assert cluster.server(follower).pid == old_pid
        with pytest.raises(NodeNotRunningError):
            await connect(
                cluster.server(follower).url, persistent=False, credentials=credentials_of(settings)
            )
        cluster.release(follower)
        await asyncio.to_thread(cluster.wait_restarted, follower, old_pid)
        await wait_replicas_current(client, settings.stream, timeout=60)
    finally:
        await client.close()


@pytest.mark.slow
async def test_appends_are_acknowledged_while_the_stream_leader_is_killed_and_it_catches_up(
    cluster: LocalCluster,
) -> None:
    """Last in the file: it kills a server. The supervisor restarts it on its store and it catches up."""
    settings = admin_settings(cluster)
    async with await EventLog.open(settings) as log:
        leader = await stream_leader(log.client, settings.stream)
        before = (await wait_replicas_current(log.client, settings.stream))["messages"]
        acked = [
            await log.append("failover", "note.added", "agent:test", {"n": n}, idempotency_key=f"k{n}")
            for n in range(5)
        ]
        old_pid = cluster.kill(leader)
        for n in range(5, 25):
            acked.append(
                await log.append("failover", "note.added", "agent:test", {"n": n}, idempotency_key=f"k{n}")
            )
        restarted = await asyncio.to_thread(cluster.wait_restarted, leader, old_pid)
        assert restarted.pid != old_pid
        settled = await wait_replicas_current(log.client, settings.stream, timeout=60)
        assert settled["messages"] == before + 25
        assert {r["name"] for r in settled["replicas"]} | {settled["leader"]} == {
            "nats-1",
            "nats-2",
            "nats-3",
        }
    assert [e.seq for e in acked] == list(range(1, 26))


@pytest.mark.slow
async def test_the_node_restarts_on_the_cluster_it_left(cluster: LocalCluster) -> None:
    """Stopped and started again: the servers come back on their ports and stores, elect leaders for the
    streams they hold, and the node waits for them (a leaderless stream leaves requests unanswered)."""
    urls = cluster.url
    settings = admin_settings(cluster)
    async with await EventLog.open(settings, persistent=False) as log:
        before = (await wait_replicas_current(log.client, settings.stream))["messages"]
    info = await asyncio.to_thread(cluster.restart)
    assert info.nats_url == urls
    async with await EventLog.open(admin_settings(cluster), persistent=False) as log:
        after = await wait_replicas_current(log.client, settings.stream, timeout=60)
        assert after["messages"] == before and after["num_replicas"] == 3
        again = await log.append("failover", "note.added", "agent:test", {"n": 0}, idempotency_key="k0")
        assert again.seq == 1  # the idempotency bucket survived the restart too


def test_more_replicas_than_one_server_fails_with_a_clear_error(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", nats_url=nats_server.url, replicas=3)

    async def attempt() -> None:
        client = await connect(nats_server.url, persistent=False)
        try:
            with pytest.raises(
                EventloomError,
                match=r"stream EVENTLOOM: 3 replicas asked for, but NATS could not place them on the 1 server ",  # noqa: E501
            ):
                await ensure_stream(client, settings)
            with pytest.raises(EventloomError, match=r"bucket B: 3 replicas asked for.*EVENTLOOM_REPLICAS"):
                await ensure_bucket(client, "B", replicas=3)
        finally:
            await client.close()

    asyncio.run(attempt())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cluster", "2"], "cluster: must be 1"),
        (["--cluster", "3", "--replicas", "5"], "replicas: 5 is more"),
    ],
)
def test_up_refuses_a_cluster_size_or_replicas_it_cannot_run(
    argv: list[str], message: str, tmp_path: Path
) -> None:
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path), "up", *argv])
    assert result.exit_code != 0
    assert message in result.output
