"""Dependencies that go away (issue 23, item 6), against real processes: the stream at its size limit,
the ledger's disk full, Neo4j stopped during projection. See docs/durability.md#dependencies-that-go-away."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from mcp import Client

from eventloom.bus.stream import jetstream_api
from eventloom.errors import StreamFullError
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.mcp.client import stdio_server, tool_caller
from tests.conftest import run_cli
from tests.mcp_support import failure

pytestmark = pytest.mark.anyio
LIMIT = 64 * 1024
NOTE = {"text": "x" * 900}


async def test_a_stream_at_its_size_limit_refuses_appends_naming_the_limit_and_drops_nothing(
    settings: Settings,
) -> None:
    limited = dataclasses.replace(settings, stream_max_bytes=LIMIT)
    async with await EventLog.open(limited) as log:
        acked = 0
        with pytest.raises(StreamFullError) as refused:
            for index in range(200):
                await log.append("full", "note.taken", "tester", NOTE | {"n": index})
                acked += 1
        message = str(refused.value)
        assert f"{LIMIT:,} bytes" in message and "EVENTLOOM_STREAM_MAX_BYTES" in message
        assert "nothing was appended" in message and "restart the node" in message
        with pytest.raises(StreamFullError):  # the idempotent path says the same
            await log.append("full", "note.taken", "tester", NOTE, idempotency_key="k1")
        info = await jetstream_api(log.client, f"STREAM.INFO.{log.layout.name}")
        assert info["config"]["discard"] == "new" and info["config"]["max_bytes"] == LIMIT
        assert info["state"]["first_seq"] == 1 and info["state"]["messages"] == acked > 30  # none dropped
        assert [e.payload["n"] async for e in log.events("full")] == list(range(acked))

    unset = dataclasses.replace(settings, stream_max_bytes=None)  # a process that does not know the limit
    appended = run_cli(unset, "append", "--session", "full", "--type", "note.taken", "--actor", "cli",
                       "--payload", json.dumps(NOTE))  # fmt: skip
    assert appended.returncode == 1, appended.stdout
    assert "is full" in appended.stdout + appended.stderr and "EVENTLOOM_STREAM_MAX_BYTES" in appended.stderr

    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}
    env["EVENTLOOM_NATS_URL"] = settings.nats_url or ""
    async with Client(stdio_server(settings.data_dir, env), read_timeout_seconds=60) as client:
        refusal = await failure(
            tool_caller(client), "memory_append", {"session": "full", "type": "note.taken", "payload": NOTE}
        )
    assert refusal.code == "unavailable" and "EVENTLOOM_STREAM_MAX_BYTES" in refusal.error["message"]

    async with await EventLog.open(dataclasses.replace(settings, stream_max_bytes=0)) as log:
        info = await jetstream_api(log.client, f"STREAM.INFO.{log.layout.name}")
        assert info["config"]["max_bytes"] == -1  # the operator's way out: no limit (or a higher one)
        assert (await log.append("full", "note.taken", "tester", NOTE)).seq == acked + 1


def test_the_limit_setting_is_read_from_the_environment_and_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EVENTLOOM_STREAM_MAX_BYTES", raising=False)
    assert Settings.from_env(tmp_path).stream_max_bytes is None
    monkeypatch.setenv("EVENTLOOM_STREAM_MAX_BYTES", "1048576")
    settings = Settings.from_env(tmp_path)
    assert settings.stream_max_bytes == 1048576 and settings.to_env()["EVENTLOOM_STREAM_MAX_BYTES"] == "1048576"
    monkeypatch.setenv("EVENTLOOM_STREAM_MAX_BYTES", "1GB")
    with pytest.raises(ValueError, match="EVENTLOOM_STREAM_MAX_BYTES"):
        Settings.from_env(tmp_path)
    with pytest.raises(ValueError, match="stream_max_bytes"):
        Settings(stream_max_bytes=-5)
