"""The bus asks who you are (issue 16, item 2): no anonymous client, and each role refused outside its
permissions, on a real nats-server configured by `eventloom nats config` and on the embedded one."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import nats.errors
import pytest
from nats.aio.client import Client

from eventloom.bus.auth import role_credentials
from eventloom.bus.connection import connect
from eventloom.bus.stream import jetstream_api
from eventloom.errors import NodeNotRunningError
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from tests.conftest import NatsServer

pytestmark = pytest.mark.anyio
Deployment = tuple[NatsServer, Settings]


class RoleClient:
    """A connection as one role that remembers the server's permission errors."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.errors: list[str] = []

    async def open(self, settings: Settings, role: str) -> RoleClient:
        credentials = role_credentials(settings.data_dir, role)
        assert settings.nats_url is not None and credentials is not None

        async def remember(error: Exception) -> None:
            self.errors.append(str(error).lower())

        self.client = await nats.connect(
            settings.nats_url,
            user=credentials.user,
            password=credentials.password,
            error_cb=remember,
            allow_reconnect=False,
        )
        return self

    async def refused(self, attempt: str) -> bool:
        """Whether the server answered `attempt` (just made) with a permissions violation."""
        for _ in range(50):
            if any("permissions violation" in e and attempt in e for e in self.errors):
                return True
            await asyncio.sleep(0.02)
        return False


@pytest.fixture
async def deployment(authenticated_nats: Deployment) -> AsyncIterator[Settings]:
    settings = authenticated_nats[1]
    async with await EventLog.open(settings) as admin:  # the data dir's admin: creates the stream
        await admin.append("s1", "note.added", "agent:a", {"text": "one"})
    yield settings


async def stream_messages(settings: Settings) -> int:
    async with await EventLog.open(settings) as admin:
        info = await jetstream_api(admin.client, f"STREAM.INFO.{settings.stream}")
        return int(info["state"]["messages"])


async def test_an_unauthenticated_or_wrong_client_is_refused(deployment: Settings) -> None:
    assert deployment.nats_url is not None
    with pytest.raises(NodeNotRunningError, match=r"without credentials.*EVENTLOOM_NATS_USER"):
        await connect(deployment.nats_url, persistent=False)
    wrong = replace(deployment, nats_user="gateway", nats_password="not-the-password")
    with pytest.raises(NodeNotRunningError, match="refused the connection as gateway"):
        await EventLog.open(wrong, persistent=False)


@pytest.mark.parametrize("role", ["gateway", "producer", "query", "projector"])
async def test_each_role_is_refused_outside_its_permissions(deployment: Settings, role: str) -> None:
    stream = deployment.stream
    before = await stream_messages(deployment)
    who = await RoleClient().open(deployment, role)
    client = who.client
    assert client is not None
    try:
        for verb in (f"STREAM.PURGE.{stream}", f"STREAM.DELETE.{stream}", f"STREAM.MSG.DELETE.{stream}"):
            with pytest.raises(nats.errors.TimeoutError):
                await client.request(f"$JS.API.{verb}", b'{"seq": 1}', timeout=1)
            assert await who.refused(f"$js.api.{verb.lower()}"), verb
        await client.publish("$KV.EVENTLOOM_QUARANTINE.abc", b"{}")
        assert await who.refused("$kv.eventloom_quarantine.abc")

        event_subject = "eventloom.0.s1"
        await client.publish(event_subject, b"raw bytes past the appender")
        await client.flush()
        assert await who.refused(event_subject) == (role not in ("gateway", "producer"))
        await client.subscribe("eventloom.q.memory.query")
        await client.flush()
        assert await who.refused("eventloom.q.memory.query") == (role != "query")
        await client.publish("eventloom.q.graph.cypher", b"{}")
        await client.flush()
        assert await who.refused("eventloom.q.graph.cypher") == (role != "gateway")
    finally:
        await client.close()
    after = await stream_messages(deployment)
    assert after == before + (1 if role in ("gateway", "producer") else 0)  # the raw publish, where allowed


@pytest.mark.parametrize("role", ["gateway", "producer"])
async def test_roles_that_append_can_append(deployment: Settings, role: str) -> None:
    credentials = role_credentials(deployment.data_dir, role)
    assert credentials is not None
    as_role = replace(deployment, nats_user=role, nats_password=credentials.password)
    async with await EventLog.open(as_role) as log:
        event = await log.append("s2", "note.added", f"agent:{role}", {"text": "allowed"})
    assert event.seq == 1


def test_the_embedded_server_refuses_anonymous_clients(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", projectors="none", producers="none")
    node = NodeProcess(settings)
    info = node.start()
    try:
        for private in ("credentials.json", "nats.conf"):
            assert stat.S_IMODE(os.stat(settings.nats_dir / private).st_mode) == 0o600
        passwords = json.loads((settings.nats_dir / "credentials.json").read_text())
        assert sorted(passwords) == ["admin", "gateway", "producer", "projector", "query"]

        async def anonymous() -> None:
            with pytest.raises(NodeNotRunningError, match="refused"):
                await connect(info.nats_url, persistent=False)

        asyncio.run(anonymous())
    finally:
        node.stop()
