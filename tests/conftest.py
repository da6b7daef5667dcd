"""Shared fixtures: a real nats-server per test (fresh JetStream store), settings and an open EventLog."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from eventloom.bus.embedded import nats_server_binary, server_config
from eventloom.log import EventLog
from eventloom.settings import Settings
from readmodels.neo4j.local import (
    LocalNeo4j,
    Neo4jEndpoint,
    Neo4jUnavailable,
    missing_tools,
    provision_neo4j,
)
from tests.runtime_support import uninstall_test_plugins

REPO = Path(__file__).resolve().parent.parent

# Tests append scratch events (`note.added` ...) of a type no agent needs. They open that
# family the documented way, as an operator would (docs/event-types.md, "Open types"); nodes and CLIs they
# start inherit it. Other scratch types are `x.`-prefixed, the open prefix.
os.environ["EVENTLOOM_OPEN_EVENT_TYPES"] = "note.*"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NatsServer:
    """A real nats-server process with JetStream on a temp store; can be killed and restarted."""

    def __init__(self, root: Path, sync: str = "default", authorization: str = "") -> None:
        self.root = root
        self.port = _free_port()
        self.config = root / "nats.conf"
        self.config.write_text(server_config(root / "store", self.port, sync, authorization=authorization))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.root / "nats.log", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(nats_server_binary()), "-c", str(self.config)], stdout=log, stderr=log
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("nats-server did not start")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    root = tmp_path / "nats"
    root.mkdir()
    server = NatsServer(root)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def settings(tmp_path: Path, nats_server: NatsServer) -> Settings:
    return Settings(data_dir=tmp_path / "data", nats_url=nats_server.url)


@pytest.fixture
async def log(settings: Settings) -> AsyncIterator[EventLog]:
    event_log = await EventLog.open(settings)
    yield event_log
    await event_log.close()


def cli_env(settings: Settings) -> dict[str, str]:
    env = {**os.environ, "EVENTLOOM_DATA_DIR": str(settings.data_dir)}
    if settings.nats_url:
        env["EVENTLOOM_NATS_URL"] = settings.nats_url
    return env


def run_cli(
    settings: Settings, *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """The real `eventloom` command in a subprocess, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


_neo4j_skipped: list[str] = []


@pytest.fixture(scope="session")
def neo4j_endpoint() -> Iterator[Neo4jEndpoint]:
    """A real Neo4j for the whole run: NEO4J_URI, else testcontainers, else a local server (see
    readmodels/graph/neo4j_local); the tests that need it are skipped, loudly, when none can be had."""
    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(provision_neo4j())
        except Neo4jUnavailable as exc:
            _neo4j_skipped.append(str(exc))
            pytest.skip(f"NEO4J TESTS SKIPPED: {exc}")
        yield endpoint


@pytest.fixture
def neo4j_restartable() -> Iterator[LocalNeo4j]:
    """A local Neo4j of the test's own, to stop, kill and start again (same port, same data)."""
    missing = missing_tools()
    if missing is not None:
        _neo4j_skipped.append(missing)
        pytest.skip(f"NEO4J TESTS SKIPPED: {missing}")
    with LocalNeo4j() as server:
        yield server


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    uninstall_test_plugins()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for reason in dict.fromkeys(_neo4j_skipped):
        terminalreporter.write_line(f"NEO4J TESTS SKIPPED: {reason}", yellow=True, bold=True)


@pytest.fixture
def authenticated_nats(tmp_path: Path) -> Iterator[tuple[NatsServer, Settings]]:
    """An existing NATS server set up from `eventloom nats config`: no anonymous client, a user per role."""
    settings = Settings(data_dir=tmp_path / "data")
    config = subprocess.run(
        [sys.executable, "-m", "gateway", "--data-dir", str(settings.data_dir), "nats", "config"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    (tmp_path / "nats").mkdir()
    server = NatsServer(tmp_path / "nats", authorization=config)
    server.start()
    yield server, replace(settings, nats_url=server.url)
    server.stop()
