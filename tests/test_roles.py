"""A deployment as separate processes against an existing NATS, as docker-compose runs it: the ledger node,
`eventloom query serve`, `eventloom producer run`, `eventloom projector run`, `eventloom gateway http`; their
healthchecks; an MCP client over HTTP calling every tool through them; a clean stop; and not one request
refused by the bus (each role's permissions cover what its process does: eventloom/bus/auth.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventloom.settings import Settings
from gateway.access.tokens import add_token
from tests.conftest import REPO, NatsServer
from tests.mcp_support import exercise_every_tool, http_tools

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Roles:
    def __init__(self, settings: Settings, logs: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}
        self.env |= {
            "EVENTLOOM_DATA_DIR": str(settings.data_dir),
            "EVENTLOOM_NATS_URL": settings.nats_url or "",
        }
        self.logs = logs
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str, **env: str) -> None:
        log = open(self.logs / f"{name}.log", "wb")  # noqa: SIM115 (the child keeps it)
        self.processes[name] = subprocess.Popen(
            [sys.executable, "-m", "gateway", *args],
            env=self.env | env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gateway", *args],
            env=self.env | env,
            capture_output=True,
            text=True,
            check=False,
        )

    def healthy(self, *args: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            checked = self.cli("health", *args, "--json")
            if checked.returncode == 0:
                return
            for name, process in self.processes.items():
                assert process.poll() is None, f"{name} exited:\n{(self.logs / f'{name}.log').read_text()}"
            assert time.monotonic() < deadline, (
                f"health {args} never passed: {checked.stdout}{checked.stderr}"
            )
            time.sleep(0.3)

    def stop(self) -> dict[str, int | None]:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = None
        return codes


@pytest.fixture
def roles(authenticated_nats: tuple[NatsServer, Settings], tmp_path: Path) -> Iterator[Roles]:
    deployment = Roles(authenticated_nats[1], tmp_path)
    yield deployment
    deployment.stop()


def role_env(settings: Settings, role: str) -> dict[str, str]:
    """What an operator hands to the role's process: `eventloom nats credentials ROLE --json`."""
    printed = subprocess.run(
        [sys.executable, "-m", "gateway", "--data-dir", str(settings.data_dir), "nats", "credentials", role,
         "--json"],
        capture_output=True, text=True, check=True, cwd=REPO,
    ).stdout  # fmt: skip
    env: dict[str, str] = json.loads(printed)
    return env


def test_the_roles_run_as_separate_processes(
    roles: Roles, authenticated_nats: tuple[NatsServer, Settings]
) -> None:
    settings = authenticated_nats[1]
    roles.start("ledger", "up", EVENTLOOM_PROJECTORS="none", EVENTLOOM_PRODUCERS="none")  # as admin
    roles.healthy("ledger")  # first: it creates the stream and the signing key the others share
    roles.start("query", "query", "serve", **role_env(settings, "query"))
    every = ("decision_citation", "retraction", "causal", "consolidation", "entity_resolution")
    producers = ("producer", "run", *every, "claims_contradictions")  # docker-compose's
    roles.start("producers", *producers, **role_env(settings, "producer"))
    roles.start("projector", "projector", "run", "workflow", **role_env(settings, "projector"))
    token = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["all"])
    port = free_port()
    gateway = role_env(settings, "gateway")
    roles.start("gateway", "gateway", "http", "--listen", f"127.0.0.1:{port}", **gateway)
    roles.healthy("query")
    roles.healthy("gateway", "--url", f"http://127.0.0.1:{port}/healthz")

    async def every_tool() -> None:
        async with http_tools(f"http://127.0.0.1:{port}/mcp", token) as call:
            await exercise_every_tool(call)

    asyncio.run(every_tool())
    # docker-compose's healthchecks, each in its role's container, with that role's credentials
    assert roles.cli("health", "query", **role_env(settings, "query")).returncode == 0
    status = roles.cli("status", "--json", **role_env(settings, "producer"))
    assert status.returncode == 0, status.stderr
    assert roles.stop() == {"ledger": 0, "query": 0, "producers": 0, "projector": 0, "gateway": 0}
    assert roles.cli("health", "ledger").returncode == 1
    server_log = (authenticated_nats[0].root / "nats.log").read_text()
    assert [line for line in server_log.splitlines() if "violation" in line.lower()] == []
