"""Crash durability: kill -9 the node, or only its nats-server, while a client appends 5,000 events.

After the crash and restart, every event the client saw acknowledged must be in the stream, every session's
chain must be whole (no gaps, no forks, no duplicates), the ledger mirror must catch up to the stream, and
`eventloom verify` must be green. See docs/durability.md for what each crash may and may not lose.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventloom.bus.auth import role_credentials
from eventloom.chain import GENESIS, ChainBreak, ChainTip, check_next
from eventloom.event import Event, decode_event
from eventloom.keys import KeyStore
from eventloom.ledger.files import iter_lines, ledger_path, read_tip
from eventloom.log import EventLog
from eventloom.runtime import RuntimeInfo
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from tests.conftest import REPO, run_cli

pytestmark = pytest.mark.slow

CLIENT = Path(__file__).resolve().parent / "durability_client.py"
EVENTS = 5000
SESSIONS = 4
PER_SESSION = EVENTS // SESSIONS
KILL_AFTER_ACKS = 1500
CLIENT_DEADLINE_S = 75.0  # the client gives up retrying after this; keeps a broken run well under 90 s
CATCH_UP_TIMEOUT_S = 30.0


# -- processes ---------------------------------------------------------------------------------------------


def _proc_state(pid: int) -> str | None:
    """The /proc state letter of `pid` ('Z' for a zombie), or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _dead(pid: int) -> bool:
    return _proc_state(pid) in (None, "Z")


def _wait_until(condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _accepts(url: str) -> bool:
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=0.2).close()
    except OSError:
        return False
    return True


def _node_env() -> dict[str, str]:
    """No EVENTLOOM_* from the caller's shell: the node must start its own embedded nats-server."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}


class CrashableNode(NodeProcess):
    """The shared node process, plus what a crash test needs: its nats-server children and their cleanup."""

    def __init__(self, data_dir: Path, log_path: Path, sync: str) -> None:
        super().__init__(Settings(data_dir=data_dir, sync=sync), log_path=log_path)
        self.nats_pids: set[int] = set()  # every embedded nats-server seen, for cleanup

    def start(self, timeout: float = 30.0) -> RuntimeInfo:
        info = super().start(timeout)
        if info.nats_pid is not None:
            self.nats_pids.add(info.nats_pid)
        return info

    def nats_children(self) -> list[int]:
        pids = [p for p in _children(self.pid) if "nats-server" in _cmdline(p) and not _dead(p)]
        self.nats_pids.update(pids)
        return pids

    def stop(self, timeout: float = 20.0) -> int | None:
        code = super().stop(timeout)
        for pid in self.nats_pids:  # they die with the node (PR_SET_PDEATHSIG); make sure of it
            if not _dead(pid) and str(self.settings.data_dir) in _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
        return code


class IdleConnection:
    """A NATS connection that sits idle when the server dies, like `eventloom tail --follow` or a quiet agent.

    When nats-server is killed, the kernel closes this connection cleanly (FIN, nothing unread), so once
    the peer closes too the server's port is left with TIME_WAIT sockets for a minute. A restart on the same
    port must cope with that. The appending client's busy connection may or may not leave the same
    state (it depends on unread bytes at the instant of the kill), so the test makes it certain.
    """

    def __init__(self, url: str, data_dir: Path) -> None:
        host, port = url.removeprefix("nats://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=5)
        self._read_until(b"INFO ")
        admin = role_credentials(data_dir, "admin")  # the node's bus asks who we are
        assert admin is not None
        hello = {
            "verbose": False,
            "pedantic": False,
            "name": "idle",
            "user": admin.user,
            "pass": admin.password,
        }
        self.sock.sendall(b"CONNECT " + json.dumps(hello).encode() + b"\r\nPING\r\n")
        self._read_until(b"PONG")

    def _read_until(self, token: bytes) -> None:
        seen = b""
        while token not in seen:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise AssertionError("nats-server closed the idle connection during the handshake")
            seen += chunk

    def close(self) -> None:
        self.sock.close()


class ClientProcess:
    """tests/durability_client.py appending EVENTS events and recording each acknowledgement."""

    def __init__(self, root: Path, data_dir: Path, url: str) -> None:
        self.acked_path = root / "acked.txt"
        self.out_path = root / "client.out"
        self.err_path = root / "client.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable, str(CLIENT),
                    "--data-dir", str(data_dir),
                    "--url", url,
                    "--acked", str(self.acked_path),
                    "--count", str(EVENTS),
                    "--sessions", str(SESSIONS),
                    "--deadline", str(CLIENT_DEADLINE_S),
                ],
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env=_node_env(),
                cwd=REPO,
                start_new_session=True,
            )  # fmt: skip

    def acked_count(self) -> int:
        try:
            return self.acked_path.read_bytes().count(b"\n")
        except OSError:
            return 0

    def wait_for_acks(self, count: int, timeout: float) -> None:
        def enough() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"client exited early with {self.process.returncode}: {self.stderr()}")
            return self.acked_count() >= count

        _wait_until(enough, timeout, f"{count} acknowledged appends")

    def finish(self, timeout: float) -> dict[str, object]:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"client still running after {timeout:.0f}s: {self.stderr()}") from None
        lines = self.out_path.read_text().strip().splitlines()
        summary = json.loads(lines[-1]) if lines else {}
        assert code == 0, f"client failed ({code}) {summary}: {self.stderr()}"
        return summary

    def acked(self) -> list[tuple[str, int, str]]:
        rows = []
        for line in self.acked_path.read_text().splitlines():
            session, seq, event_hash = line.split()
            rows.append((session, int(seq), event_hash))
        return rows

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@dataclass
class Harness:
    root: Path
    data_dir: Path
    node: CrashableNode


@pytest.fixture
def harness(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Harness]:
    sync = getattr(request, "param", "default")
    data_dir = tmp_path / "data"
    node = CrashableNode(data_dir, tmp_path / "node.log", sync)
    try:
        yield Harness(tmp_path, data_dir, node)
    finally:
        node.stop()


# -- checks --------------------------------------------------------------------------------------------------


async def _read_stream(settings: Settings) -> dict[str, list[Event]]:
    sessions: dict[str, list[Event]] = defaultdict(list)
    async with await EventLog.open(settings, persistent=False) as log:
        async for event in log.events():
            sessions[event.session].append(event)
    return dict(sessions)


def _assert_stream_has_every_ack(
    stream: dict[str, list[Event]], acked: list[tuple[str, int, str]], data_dir: Path
) -> None:
    keyring = KeyStore(data_dir).load_keyring()
    assert len(stream) == SESSIONS, sorted(stream)
    for session, events in stream.items():
        tip = GENESIS
        try:
            for event in events:  # seq contiguous from 1, prev_hash links, hash, signature
                tip = check_next(event, tip, keyring)
        except ChainBreak as exc:
            raise AssertionError(f"stream chain broken: {exc}") from None
        indexes = [event.payload["i"] for event in events]
        assert indexes == list(range(PER_SESSION)), f"{session}: events lost or stored twice"
    stored = {(e.session, e.seq): e.hash for events in stream.values() for e in events}
    missing = [row for row in acked if stored.get((row[0], row[1])) != row[2]]
    assert not missing, f"{len(missing)} acknowledged events are not in the stream, e.g. {missing[:3]}"
    assert len(set(acked)) == len(acked) == EVENTS


def _assert_ledger_catches_up(stream: dict[str, list[Event]], ledger_dir: Path) -> float:
    started = time.monotonic()

    def caught_up() -> bool:
        return all(
            read_tip(ledger_path(ledger_dir, s)) == ChainTip(events[-1].seq, events[-1].hash)
            for s, events in stream.items()
        )

    _wait_until(caught_up, CATCH_UP_TIMEOUT_S, "the ledger mirror to catch up with the stream", 0.2)
    for session, events in stream.items():
        lines = [decode_event(line) for _, line in iter_lines(ledger_path(ledger_dir, session))]
        assert [e.hash for e in lines] == [e.hash for e in events], f"{session}: ledger differs from stream"
    return time.monotonic() - started


def _assert_verify_green(data_dir: Path, url: str) -> None:
    result = run_cli(Settings(data_dir=data_dir, nats_url=url), "verify", "--json", "--wait", "30")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["ok"] is True
    counts = {s["session"]: (s["ledger_events"], s["stream_events"]) for s in report["sessions"]}
    assert counts == {f"durability-{k}": (PER_SESSION, PER_SESSION) for k in range(SESSIONS)}


def _check_everything(h: Harness, url: str, client: ClientProcess, timings: dict[str, float]) -> None:
    acked = client.acked()
    stream = asyncio.run(_read_stream(Settings(data_dir=h.data_dir, nats_url=url)))
    _assert_stream_has_every_ack(stream, acked, h.data_dir)
    timings["ledger_catch_up_s"] = round(_assert_ledger_catches_up(stream, h.data_dir / "ledger"), 2)
    _assert_verify_green(h.data_dir, url)


def _report(name: str, timings: dict[str, float], summary: dict[str, object]) -> None:
    print(f"\n{name}: {json.dumps({**timings, 'client': summary})}")


# -- the tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("harness", ["default"], indirect=True)
def test_kill_9_node_while_appending(harness: Harness) -> None:
    """The whole node dies (its nats-server with it); a restart on the same port loses nothing acked."""
    h, started = harness, time.monotonic()
    timings: dict[str, float] = {}
    info = h.node.start()
    url = info.nats_url
    idle = IdleConnection(url, h.data_dir)
    client: ClientProcess | None = None
    try:
        client = ClientProcess(h.root, h.data_dir, url)
        client.wait_for_acks(KILL_AFTER_ACKS, timeout=45)
        killed = time.monotonic()
        timings["killed_at_s"] = round(killed - started, 2)
        h.node.kill()
        acked_at_kill = client.acked_count()
        assert acked_at_kill < EVENTS, "the client finished before the crash; nothing was tested"
        assert info.nats_pid is not None
        nats_pid = info.nats_pid
        _wait_until(
            lambda: _dead(nats_pid) and not _accepts(url), 10, "the embedded nats-server to die with its node"
        )
        idle.close()
        time.sleep(1.0)  # nothing is listening; the client keeps retrying

        restarted = h.node.start()
        timings["back_after_kill_s"] = round(time.monotonic() - killed, 2)
        assert restarted.nats_url == url, (
            f"the restarted node's nats-server listens on {restarted.nats_url}, not on the remembered {url}: "
            "clients reconnecting to the same URL are stranded"
        )
        summary = client.finish(timeout=CLIENT_DEADLINE_S)
        timings["client_done_s"] = round(time.monotonic() - started, 2)
        _check_everything(h, url, client, timings)
    finally:
        idle.close()
        if client is not None:
            client.kill()
    timings["acked_at_kill"] = acked_at_kill
    timings["total_s"] = round(time.monotonic() - started, 2)
    _report("kill -9 node", timings, summary)


@pytest.mark.parametrize("harness", ["always"], indirect=True)
def test_kill_9_nats_server_while_appending(harness: Harness) -> None:
    """Only the embedded nats-server dies; the node restarts it on the same port and its mirror recovers."""
    h, started = harness, time.monotonic()
    timings: dict[str, float] = {}
    info = h.node.start()
    url = info.nats_url
    assert 'sync_interval: "always"' in (h.data_dir / "nats" / "nats.conf").read_text()
    assert h.node.nats_children() == [info.nats_pid]
    idle = IdleConnection(url, h.data_dir)
    client: ClientProcess | None = None
    try:
        client = ClientProcess(h.root, h.data_dir, url)
        client.wait_for_acks(KILL_AFTER_ACKS, timeout=45)
        assert info.nats_pid is not None
        killed = time.monotonic()
        timings["killed_at_s"] = round(killed - started, 2)
        os.kill(info.nats_pid, signal.SIGKILL)
        acked_at_kill = client.acked_count()
        assert acked_at_kill < EVENTS, "the client finished before the crash; nothing was tested"
        nats_pid = info.nats_pid
        _wait_until(lambda: _dead(nats_pid), 10, "the killed nats-server to go")
        idle.close()

        def restarted() -> bool:
            assert h.node.process is not None and h.node.process.poll() is None, "the node died with nats"
            return any(pid != info.nats_pid for pid in h.node.nats_children()) and _accepts(url)

        _wait_until(restarted, 20, "the node to restart its nats-server on the same port")
        timings["back_after_kill_s"] = round(time.monotonic() - killed, 2)
        summary = client.finish(timeout=CLIENT_DEADLINE_S)
        timings["client_done_s"] = round(time.monotonic() - started, 2)
        _check_everything(h, url, client, timings)
        assert h.node.process is not None and h.node.process.poll() is None, "the node must survive"
    finally:
        idle.close()
        if client is not None:
            client.kill()
    timings["acked_at_kill"] = acked_at_kill
    timings["total_s"] = round(time.monotonic() - started, 2)
    _report("kill -9 nats-server", timings, summary)
