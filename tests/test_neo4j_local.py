"""Provisioning a real Neo4j: the session server, a local one that stops and restarts with its data,
`eventloom dev neo4j` for people, and clear errors when none can be reached."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import neo4j
import pytest

from readmodels.neo4j.local import (
    LocalNeo4j,
    Neo4jEndpoint,
    Neo4jUnavailable,
    provision_neo4j,
    wait_until_answering,
)
from tests.conftest import REPO


def one_value(endpoint: Neo4jEndpoint, cypher: str) -> object:
    with neo4j.GraphDatabase.driver(endpoint.uri, auth=(endpoint.user, endpoint.password)) as driver:
        records, _, _ = driver.execute_query(cypher)
        return records[0][0]


def test_the_session_server_is_neo4j_5_26_community(neo4j_endpoint: Neo4jEndpoint) -> None:
    with neo4j.GraphDatabase.driver(
        neo4j_endpoint.uri, auth=(neo4j_endpoint.user, neo4j_endpoint.password)
    ) as driver:
        records, _, _ = driver.execute_query("CALL dbms.components() YIELD versions, edition")
    assert records[0]["edition"] == "community"
    assert records[0]["versions"][0].startswith("5.26.")


def test_a_local_server_listens_on_loopback_only_and_keeps_its_data_across_restarts(
    neo4j_restartable: LocalNeo4j,
) -> None:
    server = neo4j_restartable
    assert server.endpoint.uri == f"bolt://127.0.0.1:{server.port}"
    assert server.password not in " ".join(_argv_of_java_processes())  # only in the JVM's environment
    outward = _non_loopback_address()
    if outward is not None:
        with pytest.raises(OSError):
            socket.create_connection((outward, server.port), timeout=1).close()
    one_value(server.endpoint, "CREATE (n:Kept {v: 1}) RETURN n.v")
    server.stop()
    with pytest.raises(Neo4jUnavailable):
        wait_until_answering(server.endpoint, 1)
    assert server.start() == server.endpoint  # same port, same password
    assert one_value(server.endpoint, "MATCH (n:Kept) RETURN count(n)") == 1
    server.kill()  # a crash: recovery from the transaction log on the next start
    server.start()
    assert one_value(server.endpoint, "MATCH (n:Kept) RETURN count(n)") == 1


def test_neo4j_uri_is_used_when_set_and_a_wrong_one_fails_fast(
    neo4j_endpoint: Neo4jEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEO4J_URI", neo4j_endpoint.uri)
    monkeypatch.setenv("NEO4J_USER", neo4j_endpoint.user)
    monkeypatch.setenv("NEO4J_PASSWORD", neo4j_endpoint.password)
    with provision_neo4j() as endpoint:
        assert endpoint.source == "env" and endpoint.uri == neo4j_endpoint.uri
    monkeypatch.setenv("NEO4J_PASSWORD", "not-the-password")
    with pytest.raises(Neo4jUnavailable, match="refused the credentials"), provision_neo4j():
        pass
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:9")
    started = time.monotonic()
    with pytest.raises(Neo4jUnavailable, match="did not answer"), provision_neo4j():
        pass
    assert time.monotonic() - started < 25  # the driver alone would retry for ~30 s


@pytest.mark.slow
def test_eventloom_dev_neo4j_prints_credentials_and_stops_on_ctrl_c(neo4j_endpoint: Neo4jEndpoint) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gateway",
            "dev",
            "neo4j",
            "--json",
            "--heap",
            "512m",
            "--page-cache-mib",
            "64",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("NEO4J_")},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        described = json.loads(line)
        assert described["source"] == "local" and described["uri"].startswith("bolt://127.0.0.1:")
        endpoint = Neo4jEndpoint(described["uri"], described["user"], described["password"], "local")
        assert one_value(endpoint, "RETURN 1") == 1
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        assert not Path(described["home"]).exists()
        with pytest.raises(Neo4jUnavailable):
            wait_until_answering(endpoint, 1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _dev_neo4j(data: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gateway", "dev", "neo4j", "--json", "--data", str(data),
         "--heap", "512m", "--page-cache-mib", "64"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("NEO4J_")},
    )  # fmt: skip


def _run_dev_neo4j_once(data: Path, cypher: str) -> object:
    """`eventloom dev neo4j --data DATA` until it answers `cypher`, then Ctrl-C; the query's value."""
    process = _dev_neo4j(data)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.communicate(timeout=60)[1]
        described = json.loads(line)
        endpoint = Neo4jEndpoint(described["uri"], described["user"], described["password"], "local")
        value = one_value(endpoint, cypher)
        process.send_signal(signal.SIGINT)
        assert process.wait(60) == 0
        return value
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.slow
def test_eventloom_dev_neo4j_restarts_on_its_own_data(neo4j_endpoint: Neo4jEndpoint, tmp_path: Path) -> None:
    data = tmp_path / "neo4j"
    assert _run_dev_neo4j_once(data, "CREATE (n:Kept {v: 1}) RETURN n.v") == 1
    kept = data / "eventloom-neo4j-password"
    assert kept.stat().st_mode & 0o777 == 0o600
    assert _run_dev_neo4j_once(data, "MATCH (n:Kept) RETURN count(n)") == 1  # same data, same password
    kept.unlink()  # lost: a new password is made and set; the data stays
    assert _run_dev_neo4j_once(data, "MATCH (n:Kept) RETURN count(n)") == 1
    assert kept.stat().st_mode & 0o777 == 0o600


def _argv_of_java_processes() -> list[str]:
    listing = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in listing.splitlines() if "Neo4jLauncher" in line]


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") else address
