"""Dependencies that go away (issue 23, item 6), against real processes: the stream at its size limit,
the ledger's disk full, Neo4j stopped during projection. See docs/durability.md#dependencies-that-go-away."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import os
import resource
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import nats.js.errors
import pytest
from mcp import Client

from eventloom.bus.stream import jetstream_api
from eventloom.dlq import list_dead_letters
from eventloom.errors import StreamFullError
from eventloom.event import decode_event, encode_event
from eventloom.ledger.disk_full import is_disk_full
from eventloom.ledger.files import LedgerWriter
from eventloom.log import EventLog
from eventloom.runtime import RoleState, read_runtime
from eventloom.settings import Settings
from gateway.mcp.client import stdio_server, tool_caller
from gateway.node_process import NodeProcess
from projectors.graph.rebuild_neo4j import rebuild_neo4j_from_stream
from readmodels.neo4j.graph_store import Neo4jGraphStore
from tests.conftest import run_cli
from tests.mcp_support import failure
from tests.test_graph_rebuild import story
from tests.test_graph_support import dump

if TYPE_CHECKING:
    from readmodels.neo4j.local import LocalNeo4j

pytestmark = pytest.mark.anyio
LIMIT = 64 * 1024
UNLIMITED = resource.RLIM_INFINITY
NOTE = {"text": "x" * 900}


async def test_a_stream_at_its_size_limit_refuses_appends_naming_the_limit_and_drops_nothing(
    settings: Settings,
) -> None:
    limited = dataclasses.replace(settings, stream_max_bytes=LIMIT)
    async with await EventLog.open(limited) as log:
        acked = 0
        with pytest.raises(StreamFullError) as refused:
            for index in range(200):
                await log.append("full", "x.note.taken", "tester", NOTE | {"n": index})
                acked += 1
        message = str(refused.value)
        assert f"{LIMIT:,} bytes" in message and "EVENTLOOM_STREAM_MAX_BYTES" in message
        assert "nothing was appended" in message and "restart the node" in message
        with pytest.raises(StreamFullError):  # the idempotent path says the same
            await log.append("full", "x.note.taken", "tester", NOTE, idempotency_key="k1")
        info = await jetstream_api(log.client, f"STREAM.INFO.{log.layout.name}")
        assert info["config"]["discard"] == "new" and info["config"]["max_bytes"] == LIMIT
        assert info["state"]["first_seq"] == 1 and info["state"]["messages"] == acked > 30  # none dropped
        assert [e.payload["n"] async for e in log.events("full")] == list(range(acked))

    unset = dataclasses.replace(settings, stream_max_bytes=None)  # a process that does not know the limit
    appended = run_cli(unset, "append", "--session", "full", "--type", "x.note.taken", "--actor", "cli",
                       "--payload", json.dumps(NOTE))  # fmt: skip
    assert appended.returncode == 1, appended.stdout
    assert "is full" in appended.stdout + appended.stderr and "EVENTLOOM_STREAM_MAX_BYTES" in appended.stderr

    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}
    env["EVENTLOOM_NATS_URL"] = settings.nats_url or ""
    async with Client(stdio_server(settings.data_dir, env), read_timeout_seconds=60) as client:
        refusal = await failure(
            tool_caller(client), "memory_append", {"session": "full", "type": "x.note.taken", "payload": NOTE}
        )
    assert refusal.code == "unavailable" and "EVENTLOOM_STREAM_MAX_BYTES" in refusal.error["message"]

    async with await EventLog.open(dataclasses.replace(settings, stream_max_bytes=0)) as log:
        info = await jetstream_api(log.client, f"STREAM.INFO.{log.layout.name}")
        assert info["config"]["max_bytes"] == -1  # the operator's way out: no limit (or a higher one)
        assert (await log.append("full", "x.note.taken", "tester", NOTE)).seq == acked + 1


def test_the_limit_setting_is_read_from_the_environment_and_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("EVENTLOOM_STREAM_MAX_BYTES", raising=False)
    assert Settings.from_env(tmp_path).stream_max_bytes is None
    monkeypatch.setenv("EVENTLOOM_STREAM_MAX_BYTES", "1048576")
    settings = Settings.from_env(tmp_path)
    assert settings.stream_max_bytes == 1048576
    assert settings.to_env()["EVENTLOOM_STREAM_MAX_BYTES"] == "1048576"
    monkeypatch.setenv("EVENTLOOM_STREAM_MAX_BYTES", "1GB")
    with pytest.raises(ValueError, match="EVENTLOOM_STREAM_MAX_BYTES"):
        Settings.from_env(tmp_path)
    with pytest.raises(ValueError, match="stream_max_bytes"):
        Settings(stream_max_bytes=-5)


# --- the ledger's disk full ------------------------------------------------------------------------------


def _ledger_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n"), "a torn last line"
    lines = data.splitlines()
    for line in lines:
        decode_event(line)  # every line a whole event
    return lines


def _mirror_state(settings: Settings) -> RoleState:
    info = read_runtime(settings.runtime_file)
    assert info is not None
    return info.role_states.get("ledger-mirror", RoleState())


async def _until(check: Callable[[], bool], what: str, timeout: float = 30) -> float:
    """Seconds until `check()` holds."""
    started = time.monotonic()
    while not await asyncio.to_thread(check):
        assert time.monotonic() - started < timeout, f"not within {timeout:g}s: {what}"
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def _append(log: EventLog, first: int, count: int) -> None:
    for index in range(first, first + count):
        note = NOTE | {"n": index}
        await log.append("ledgered", "x.note.taken", "tester", note, idempotency_key=f"k{index}")


@pytest.mark.slow
async def test_a_full_ledger_disk_stops_the_mirror_cleanly_and_it_resumes_when_space_returns(
    tmp_path: Path,
) -> None:
    """The node runs under a real file-size limit (RLIMIT_FSIZE, set on its pid from outside, as `prlimit`
    would): its ledger writes fail with EFBIG exactly as on a full disk, everything else goes on."""
    settings = Settings(data_dir=tmp_path / "data", projectors="none", producers="none")
    node = NodeProcess(settings)
    info = await asyncio.to_thread(node.start, 30)
    ledger = settings.ledger_dir / "ledgered.jsonl"
    try:
        async with await EventLog.open(settings, url=info.nats_url) as log:
            await _append(log, 0, 60)
            await _until(lambda: ledger.exists() and len(_ledger_lines(ledger)) == 60, "the mirror copies")
            limit = ledger.stat().st_size + 100  # not room for one more event; other files are smaller
            resource.prlimit(node.pid, resource.RLIMIT_FSIZE, (limit, UNLIMITED))
            await _append(log, 60, 1)  # acknowledged: an append never waits for the ledger
            detected = await _until(lambda: _mirror_state(settings).state == "failing", "failing shown")
            await _append(log, 61, 39)
            await _until(lambda: (_mirror_state(settings).retry_in_s or 0) >= 1, "backing off", 10)

            lines = _ledger_lines(ledger)  # cut back: whole events only, within the limit
            assert len(lines) == 60 and ledger.stat().st_size <= limit
            state = _mirror_state(settings)
            assert state.last_error and "File too large" in state.last_error
            assert "acknowledges nothing" in state.last_error and str(settings.ledger_dir) in state.last_error
            await _shows_failing(settings)

            # nats-server, restarted by the node while the limit holds, must not inherit it
            nats_pid = info.nats_pid
            assert nats_pid is not None
            os.kill(nats_pid, signal.SIGKILL)
            await _until(lambda: _nats_pid(settings) not in (None, nats_pid), "nats-server restarted")
            await _append(log, 100, 20)  # its store grows past the node's limit
            assert _alive(_nats_pid(settings))

            resource.prlimit(node.pid, resource.RLIMIT_FSIZE, (UNLIMITED, UNLIMITED))
            resumed = await _until(lambda: len(_ledger_lines(ledger)) == 120, "the mirror resumes")
            await _until(lambda: _mirror_state(settings).state == "running", "running shown", 10)
            stream = [encode_event(event) async for event in log.events("ledgered")]
            assert _ledger_lines(ledger) == stream and len(stream) == 120
        verified = await asyncio.to_thread(run_cli, settings, "verify", "--json")
        assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True, verified.stdout
        incidents = (settings.ledger_dir / "incidents.log").read_text()
        assert "(started)" in incidents and "written again" in incidents
        print(f"ledger full: failing shown {detected:.2f}s after an append; caught up {resumed:.2f}s after")
    finally:
        await asyncio.to_thread(node.stop)


async def _shows_failing(settings: Settings) -> None:
    status = await asyncio.to_thread(run_cli, settings, "status", "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert "File too large" in report["node"]["failing"]["ledger-mirror"]["last_error"]
    assert any("cannot be written" in incident for incident in report["ledger_incidents"])
    (mirror,) = [c for c in report["consumers"] if c["name"] == "ledger-mirror"]
    assert mirror["lag"] > 0  # nothing acknowledged that is not in the ledger
    health = await asyncio.to_thread(run_cli, settings, "health", "ledger")  # compose's healthcheck
    assert health.returncode == 1 and "ledger-mirror" in health.stdout, health.stdout + health.stderr


def _nats_pid(settings: Settings) -> int | None:
    info = read_runtime(settings.runtime_file)
    return info.nats_pid if info else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_write_that_hits_the_limit_is_cut_back_to_what_was_synced(tmp_path: Path) -> None:
    writer = LedgerWriter(tmp_path)
    writer.write("s", [b"a" * 99])
    writer.sync()
    path = tmp_path / "s.jsonl"
    synced = path.stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (synced + 150, hard))  # this process: SIGXFSZ is ignored
    try:
        writer.write("s", [b"b" * 99])  # fits, not yet synced
        with pytest.raises(OSError) as failed:
            writer.write("s", [b"c" * 99])  # 50 bytes land, then EFBIG
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert failed.value.errno == errno.EFBIG and is_disk_full(failed.value)
    assert path.read_bytes() == b"a" * 99 + b"\n"  # the unsynced line went too: the batch is retried whole
    assert writer.cut_bytes == 150
    writer.write("s", [b"b" * 99, b"c" * 99])
    writer.close()
    assert path.read_bytes().splitlines() == [b"a" * 99, b"b" * 99, b"c" * 99]


# --- Neo4j stopped during projection ---------------------------------------------------------------------


def _role(settings: Settings, role: str) -> RoleState:
    info = read_runtime(settings.runtime_file)
    assert info is not None
    return info.role_states.get(role, RoleState())


async def _pending(log: EventLog, consumer: str) -> int:
    """What `consumer` has not acknowledged (-1 until the projector has opened its store and consumer)."""
    try:
        info = await log.client.jetstream().consumer_info(log.layout.name, consumer)
    except nats.js.errors.NotFoundError:
        return -1
    return int(info.num_pending or 0) + int(info.num_ack_pending or 0)


@pytest.mark.slow
async def test_neo4j_stopped_during_projection_shows_failing_and_resumes_to_a_clean_rebuild(
    settings: Settings, neo4j_restartable: LocalNeo4j
) -> None:
    """A Neo4j of the test's own (the session's shared one goes on serving the other tests), a node whose
    graph projector writes to it, on the test's NATS (so the stream outlives the node for the rebuild)."""
    endpoint = neo4j_restartable.endpoint
    graph = dataclasses.replace(
        settings, graph_backend="neo4j", neo4j_uri=endpoint.uri, neo4j_user=endpoint.user,
        neo4j_password=endpoint.password, embedder="hash", projectors="graph", producers="none",
    )  # fmt: skip
    node = NodeProcess(graph)
    await asyncio.to_thread(node.start, 60)
    consumer = "projector-graph"
    try:
        async with await EventLog.open(graph) as log:
            await log.append_many(story("a"))
            await _until_async(lambda: _pending(log, consumer), "the graph projector catches up")
            await asyncio.to_thread(neo4j_restartable.kill)  # stopped as a crash would, at once
            await log.append_many(story("b") + story("a"))  # acknowledged while Neo4j is down
            detected = await _until(lambda: _role(graph, "projector:graph").state == "failing", "failing", 90)
            state = _role(graph, "projector:graph")
            assert state.last_error and "unavailable" in state.last_error and state.retry_in_s is not None
            await _graph_shows_failing(graph)
            assert await _pending(log, consumer) > 0  # nothing acknowledged, nothing dead-lettered
            assert await list_dead_letters(log.client, consumer) == []

            await asyncio.to_thread(neo4j_restartable.start)
            running = await _until(lambda: _role(graph, "projector:graph").state == "running", "running", 90)
            resumed = running + await _until_async(lambda: _pending(log, consumer), "the projector resumes")
            assert await list_dead_letters(log.client, consumer) == []
    finally:
        await asyncio.to_thread(node.stop)
    print(
        f"neo4j down: failing {detected:.1f}s after the appends; once it answers again, running after "
        f"{running:.1f}s, caught up after {resumed:.1f}s"
    )
    async with Neo4jGraphStore(endpoint.uri, user=endpoint.user, password=endpoint.password) as store:
        assert await store.applied_seqs("graph", ["a", "b"]) == {"a": 14, "b": 7}
        recovered = {session: await dump(store, session) for session in ("a", "b")}
        async with await EventLog.open(graph) as log:
            await rebuild_neo4j_from_stream(log)
        assert {session: await dump(store, session) for session in ("a", "b")} == recovered


async def _until_async(pending: Callable[[], Awaitable[int]], what: str, timeout: float = 60) -> float:
    """Seconds until `pending()` is 0."""
    started = time.monotonic()
    while await pending():
        assert time.monotonic() - started < timeout, f"not within {timeout:g}s: {what}"
        await asyncio.sleep(0.1)
    return time.monotonic() - started


async def _graph_shows_failing(settings: Settings) -> None:
    """`health` and `projector status` (`status` shows the same failing roles: the ledger test reads it)."""
    health = await asyncio.to_thread(run_cli, settings, "health", "node", "--json")
    assert health.returncode == 1, health.stdout
    failing = json.loads(health.stdout)["failing"]
    assert "unavailable" in failing["projector:graph"]["last_error"] and "ledger-mirror" not in failing
    rows = json.loads((await asyncio.to_thread(run_cli, settings, "projector", "status", "--json")).stdout)
    (row,) = [row for row in rows if row["consumer"] == "projector-graph"]
    assert row["state"] == "failing" and "unavailable" in row["last_error"] and row["lag"] > 0
