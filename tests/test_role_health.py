"""A role that cannot work shows as failing everywhere a user looks (issue 17, defect 2): `status`,
`health node|query|gateway` (non-zero), `projector status` and the HTTP gateway's `/healthz`, each with the
last error; and its retries back off. The failing roles are real: the Neo4j-backed projectors of a node
pointed at a Neo4j address where nothing listens. (tests/test_supervisor.py covers roles that raise.)"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from eventloom.runtime import RuntimeInfo, read_runtime
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from tests.conftest import run_cli


def _unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def broken_graph_node(tmp_path: Path) -> Iterator[tuple[Settings, RuntimeInfo]]:
    settings = Settings(
        data_dir=tmp_path / "data", graph_backend="neo4j", neo4j_uri=f"bolt://127.0.0.1:{_unused_port()}"
    )
    NodeProcess(settings, http="127.0.0.1:0").start(timeout=30)
    try:
        deadline = time.monotonic() + 60
        while True:
            info = read_runtime(settings.runtime_file)
            assert info is not None
            graph = info.role_states.get("projector:graph")
            if graph is not None and (graph.retry_in_s or 0) >= 2.0 and info.http_url:
                break
            assert time.monotonic() < deadline, f"the graph role never backed off to 2s: {info}"
            time.sleep(0.2)
        yield settings, info
    finally:
        assert run_cli(settings, "down").returncode == 0


def test_a_failing_role_shows_in_status_health_projector_status_and_healthz(
    broken_graph_node: tuple[Settings, RuntimeInfo],
) -> None:
    settings, info = broken_graph_node
    graph = info.role_states["projector:graph"]
    assert graph.state == "failing" and graph.last_error and graph.retry_in_s is not None
    assert "Neo4j" in graph.last_error and "unavailable" in graph.last_error
    assert info.role_states["ledger-mirror"].state == "running"

    status = run_cli(settings, "status", "--json")
    assert status.returncode == 0, status.stderr
    node = json.loads(status.stdout)["node"]
    assert "projector:graph" in node["failing"] and "ledger-mirror" not in node["failing"]
    assert "unavailable" in node["failing"]["projector:graph"]["last_error"]
    text = run_cli(settings, "status")
    assert "projector:graph (failing)" in text.stdout and "role projector:graph failing" in text.stdout

    for role in ("node", "query"):
        health = run_cli(settings, "health", role, "--json")
        assert health.returncode == 1, (role, health.stdout, health.stderr)
        report = json.loads(health.stdout)
        assert report["ok"] is False and "projector:graph" in report["failing"], report
        assert report["failing"]["projector:graph"]["last_error"]
    plain = run_cli(settings, "health", "query")
    assert plain.returncode == 1 and "role projector:graph failing" in plain.stdout
    assert "next try in" in plain.stdout

    listed = run_cli(settings, "projector", "status")
    assert listed.returncode == 0, listed.stderr
    assert "role projector:graph failing" in listed.stdout
    rows = json.loads(run_cli(settings, "projector", "status", "--json").stdout)
    graph_row = next((row for row in rows if row["consumer"] == "projector-graph"), None)
    if graph_row is not None:  # the consumer exists once the store opened at least once
        assert graph_row["state"] == "failing"

    assert info.http_url is not None
    healthz = info.http_url.removesuffix("/mcp") + "/healthz"
    answer = httpx2.get(healthz, timeout=10)
    assert answer.status_code == 503
    assert answer.json()["ok"] is False and "projector:graph" in answer.json()["failing"]
    assert all(state == {"state": "failing"} for state in answer.json()["failing"].values())  # no error
    gateway = run_cli(settings, "health", "gateway", "--url", healthz, "--json")
    assert gateway.returncode == 1 and "projector:graph" in json.loads(gateway.stdout)["failing"]

    log = (settings.data_dir / "node.log").read_text()
    assert "projector-graph: read model unavailable" in log
