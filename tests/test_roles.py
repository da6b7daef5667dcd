"""A deployment as separate processes against an existing NATS, as docker-compose runs it (its services'
commands and environments, read from docker-compose.yml): the ledger node, `eventloom query serve` (every
read model, the packs' included), `eventloom producer run`, `eventloom gateway http`; their healthchecks; an
MCP client over HTTP calling every tool of every toolset through them; a clean stop; and not one request
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
from typing import Any, Final

import pytest

from eventloom.settings import Settings
from gateway.access.tokens import add_token
from gateway.mcp.client import ToolCallFailed
from tests.compose_support import command_argv, environment, services
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


LOCAL_ONLY: Final = frozenset(
    {
        "EVENTLOOM_DATA_DIR",
        "EVENTLOOM_NATS_URL",
        "EVENTLOOM_GRAPH_BACKEND",
        "NEO4J_URI",
        "NEO4J_USER",
        "NEO4J_PASSWORD",
    }
)
"""Where a container finds its volume, NATS and Neo4j: here the test's data dir, its NATS and the embedded
graph (the Neo4j stores are tested on their own)."""


def compose_roles(settings: Settings, gateway_port: int) -> list[tuple[str, list[str], dict[str, str]]]:
    """docker-compose.yml's eventloom services, ledger first: each one's command and environment, with the
    NATS user it names given the credentials `eventloom nats credentials` prints for that role."""
    layout = []
    for name, service in services().items():
        if service.get("image") != "eventloom:local" or "healthcheck" not in service or "profiles" in service:
            continue  # not a role: NATS, Neo4j, the one-shot `nats config` runs, the cluster profile
        argv = command_argv(service)
        if argv[:2] == ["gateway", "http"]:
            argv = [
                "gateway",
                "http",
                "--listen",
                f"127.0.0.1:{gateway_port}",
                "--tokens",
                str(settings.tokens_file),
            ]
        env = {k: v for k, v in environment(service).items() if k not in LOCAL_ONLY}
        user = env.pop("EVENTLOOM_NATS_USER", "admin")
        env |= role_env(settings, user) if user != "admin" else {}
        layout.append((name, argv, env))
    return sorted(layout, key=lambda role: role[0] != "ledger")


def test_the_roles_run_as_separate_processes(
    roles: Roles, authenticated_nats: tuple[NatsServer, Settings]
) -> None:
    settings = authenticated_nats[1]
    port = free_port()
    layout = compose_roles(settings, port)
    assert {name for name, _, _ in layout} == {"ledger", "query", "producers", "gateway"}
    for name, argv, env in layout:
        roles.start(name, *argv, **env)
        if name == "ledger":
            roles.healthy("ledger")  # first: it creates the stream and the signing key the others share
    token = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["all"])
    roles.healthy("query")
    roles.healthy("gateway", "--url", f"http://127.0.0.1:{port}/healthz")

    async def every_tool() -> None:
        async with http_tools(f"http://127.0.0.1:{port}/mcp", token) as call:
            await exercise_every_tool(call)
            await every_pack_question_answers(call)

    asyncio.run(every_tool())
    # docker-compose's healthchecks, each in its role's container, with that role's credentials
    assert roles.cli("health", "query", **role_env(settings, "query")).returncode == 0
    status = roles.cli("status", "--json", **role_env(settings, "producer"))
    assert status.returncode == 0, status.stderr
    assert roles.stop() == {name: 0 for name, _, _ in layout}
    assert roles.cli("health", "ledger").returncode == 1
    server_log = (authenticated_nats[0].root / "nats.log").read_text()
    assert [line for line in server_log.splitlines() if "violation" in line.lower()] == []


PACK_QUESTIONS: Final = {
    "workflow_runs": {},
    "workflow_issue_runs": {"issue": "octo/widgets#1"},
    "workflow_sequence": {"run_id": "r-1"},
    "workflow_tool_calls": {},
    "workflow_plan_history": {"plan_id": "p-1"},
    "workflow_implementation": {"issue": "octo/widgets#1"},
    "workflow_item": {"key": "octo/widgets#1"},
    "workflow_path": {"run_id": "r-1"},
    "claims_about": {"entity": "Alice"},
    "claims_contradictions": {},
    "claims_observations": {"entity": "Alice"},
    "claims_entity": {"entity": "Alice"},
}


async def every_pack_question_answers(call: Any) -> None:
    """Each pack's questions are answered by its projector's service (no `unavailable`): a run and an
    observation recorded through the packs' tools are read back."""
    for projector_question in ("workflow_runs", "claims_contradictions"):  # each projector, once it serves
        await until_answered(call, projector_question)
    run = await call("workflow_run_start", {"session": "packs-1", "workflow_type": "fix-issue"})
    seen = await call(
        "claims_observe", {"session": "packs-1", "content": "Alice joined Acme.", "source": "chat"}
    )
    for name, arguments in PACK_QUESTIONS.items():
        await call(name, arguments)  # raises on any error, `unavailable` included
    runs = await call("workflow_runs", {})
    assert run["run_id"] in {r["run_id"] for r in runs["runs"]}
    found = await call("claims_observations", {"entity": "Alice"})
    assert seen["citation"] in {o["citation"] for o in found["observations"]}


async def until_answered(call: Any, name: str, timeout_s: float = 60) -> None:
    """Ask until the projector answering `name` serves (it starts beside the others, in its own process)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            await call(name, {})
            return
        except ToolCallFailed as failed:
            assert failed.code == "unavailable", failed.error
            assert asyncio.get_running_loop().time() < deadline, failed.error
        await asyncio.sleep(0.2)
