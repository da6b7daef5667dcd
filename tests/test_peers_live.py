"""Peer status with real processes (issue 22, part B): a node with its HTTP gateway, a projector worker and a
stand-alone HTTP gateway show up in `eventloom status peers`; the worker, killed with kill -9, turns suspect
and then dead within the configured times. And every bus role may send and read heartbeats."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eventloom.bus import HeartbeatPublisher, PeerWatcher, read_peers
from eventloom.bus.auth import role_credentials
from eventloom.bus.connection import connect, credentials_of
from eventloom.runtime import resolve_nats_url
from eventloom.settings import Settings
from gateway.buckets import ensure_node_buckets
from gateway.node_process import NodeProcess
from tests.conftest import REPO, NatsServer, run_cli

INTERVAL_S, SUSPECT_S, DEAD_S = 0.3, 1.0, 3.0
PEER_ENV = {
    "EVENTLOOM_HEARTBEAT_INTERVAL_S": str(INTERVAL_S),
    "EVENTLOOM_PEER_SUSPECT_AFTER_S": str(SUSPECT_S),
    "EVENTLOOM_PEER_DEAD_AFTER_S": str(DEAD_S),
}


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    for name, value in PEER_ENV.items():  # for the CLI runs (run_cli passes the environment on)
        monkeypatch.setenv(name, value)
    settings = Settings(
        data_dir=tmp_path / "data",
        projectors="none",
        producers="none",
        heartbeat_interval_s=INTERVAL_S,
        peer_suspect_after_s=SUSPECT_S,
        peer_dead_after_s=DEAD_S,
    )
    process = NodeProcess(settings, http="127.0.0.1:0")
    process.start(timeout=30)
    yield settings
    process.stop()


def start(settings: Settings, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`eventloom ARGS` in the background with exactly these settings, on the node's data dir."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")} | settings.to_env()
    with open(log, "wb") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", *args],
            env=env,
            cwd=REPO,
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def peers(settings: Settings) -> dict[str, dict[str, Any]]:
    """`eventloom status peers --json`, by role (each role runs once here)."""
    result = run_cli(settings, "status", "peers", "--json")
    assert result.returncode == 0, result.stderr
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return {row["role"]: row for row in rows}


def node_said(settings: Settings, line: str, timeout: float = 5.0) -> str:
    """The node's log, once it has `line` (the node derives every peer's status itself, and says so)."""
    deadline = time.monotonic() + timeout
    while line not in (said := (settings.data_dir / "node.log").read_text()):
        assert time.monotonic() < deadline, f"the node never said {line!r}"
        time.sleep(0.1)
    return said


async def statuses_after_kill(settings: Settings, peer_id: str) -> list[tuple[str, float]]:
    """Each status `peer_id` shows from now until it is dead, with the seconds from now when it was seen."""
    started = time.monotonic()
    changes: list[tuple[str, float]] = []
    client = await connect(resolve_nats_url(settings), persistent=False, credentials=credentials_of(settings))
    try:
        while not changes or changes[-1][0] != "dead":
            assert time.monotonic() - started < DEAD_S + 5, changes
            [status] = [p.status for p in await read_peers(client, settings) if p.heartbeat.id == peer_id]
            if not changes or changes[-1][0] != status:
                changes.append((status, round(time.monotonic() - started, 2)))
            await asyncio.sleep(0.05)
    finally:
        await client.close()
    return changes


def until_peers(settings: Settings, done: Any, timeout: float = 60.0) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while not done(found := peers(settings)):
        assert time.monotonic() < deadline, f"peers never got there: {found}"
    return found


def test_processes_show_up_and_a_killed_worker_turns_suspect_then_dead(
    node: Settings, tmp_path: Path
) -> None:
    worker = start(node, tmp_path / "worker.log", "projector", "run", "inferred")
    gateway = start(node, tmp_path / "gateway.log", "gateway", "http", "--listen", "127.0.0.1:0")
    try:

        def all_up(found: dict[str, dict[str, Any]]) -> bool:  # the lag, once the runner made its consumer
            return {"node", "projector", "gateway-http"} <= set(found) and bool(found["projector"]["lag"])

        found = until_peers(node, all_up, timeout=90)
        assert all(peer["status"] == "alive" for peer in found.values()), found
        projector, standalone, own = found["projector"], found["gateway-http"], found["node"]
        capabilities = projector["capabilities"]  # and its part in the consumer's lease, once it has one
        assert capabilities[0] == "projector:inferred"
        assert set(capabilities[1:]) <= {f"lease:projector-inferred:{r}" for r in ("active", "standby")}
        assert projector["pid"] == worker.pid
        assert set(projector["lag"]) == {"projector-inferred"} and projector["urls"] == []
        assert standalone["urls"][0].startswith("http://127.0.0.1:") and standalone["lag"] is None
        assert {"gateway-http", "ledger-mirror"} <= set(own["capabilities"])
        assert own["urls"][0].endswith("/mcp") and set(own["lag"]) == {"ledger-mirror"}
        assert len({own["version"], projector["version"], standalone["version"]}) == 1

        worker.kill()  # kill -9: no goodbye, the heartbeats just stop
        worker.wait()
        # The CLI takes seconds to start: the times are watched through what it calls, `read_peers`.
        changes = asyncio.run(statuses_after_kill(node, projector["id"]))
        assert [status for status, _ in changes if status != "alive"] == ["suspect", "dead"], changes
        (_, suspect_at), (_, dead_at) = changes[-2:]
        assert suspect_at <= SUSPECT_S + 1.0 and dead_at <= DEAD_S + 1.0, changes  # 1s: on a loaded host
        dead = peers(node)
        assert dead["projector"]["status"] == "dead" and dead["projector"]["age_s"] >= DEAD_S
        assert dead["node"]["status"] == "alive"
        said = node_said(node, f"peer {projector['id']} (projector on {projector['host']}) is dead")
        assert (
            f"peer {projector['id']} (projector on {projector['host']}) is suspect" in said
        )  # its own table
    finally:
        for process in (worker, gateway):
            process.kill()
            process.wait()


@pytest.mark.anyio
async def test_every_bus_role_may_send_and_watch_heartbeats_and_read_the_bucket(
    authenticated_nats: tuple[NatsServer, Settings],
) -> None:
    settings = replace(authenticated_nats[1], heartbeat_interval_s=0.1, peer_suspect_after_s=1.0)
    assert settings.nats_url is not None
    roles = ("gateway", "producer", "query", "projector")
    admin = await connect(
        settings.nats_url, persistent=False, credentials=role_credentials(settings.data_dir, "admin")
    )
    try:
        await ensure_node_buckets(admin, replicas=1)  # the node creates them: no other role may
    finally:
        await admin.close()
    async with contextlib.AsyncExitStack() as stack:
        watchers = []
        for role in roles:
            credentials = role_credentials(settings.data_dir, role)
            client = await connect(settings.nats_url, name=role, persistent=False, credentials=credentials)
            stack.push_async_callback(client.close)
            watchers.append(
                (client, await stack.enter_async_context(PeerWatcher(client, settings).running()))
            )
            await stack.enter_async_context(HeartbeatPublisher(client, settings, role=role).running())
        deadline = time.monotonic() + 10
        while not all(len(watcher.peers()) == len(roles) for _, watcher in watchers):
            assert time.monotonic() < deadline, [len(watcher.peers()) for _, watcher in watchers]
            await asyncio.sleep(0.05)
        for client, _ in watchers:
            assert sorted(p.heartbeat.role for p in await read_peers(client, settings)) == sorted(roles)
