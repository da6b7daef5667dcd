"""Faults injected into the members of a `LocalCluster` (issue 23, item 3), shared by
tests/test_cluster_faults.py and bench/cluster.py (the bench imports it as `tests.faults`).

Each injection returns a `Fault` saying what was done to which member, when (`time.monotonic()`, one clock
for every process on the machine, so the appending client's acknowledgement times compare with it), and
how long the member took to be back (`back_s`: restarted, or resumed). Damage to a store is done while the
member is held down (`LocalCluster.kill(hold=True)`), then the supervisor starts it again on what is left.

The `.blk` files damaged are the stream's own message blocks: `<store>/jetstream/<account>/streams/
EVENTLOOM/msgs/*.blk` (account `$G` when the server has users but no accounts).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import nats.errors
from nats.aio.client import Client

from eventloom.bus.stream import jetstream_api
from eventloom.errors import EventloomError
from tests.cluster_support import LocalCluster, stream_leader

CLIENT: Final = Path(__file__).resolve().parent / "durability_client.py"

KILL_LEADER: Final = "kill_leader"
PAUSE: Final = "pause"
KILL_RESTART: Final = "kill_restart"
WIPE: Final = "wipe_store"
TRUNCATE: Final = "truncate_blk"
BITFLIP: Final = "bitflip_blk"
KINDS: Final = (KILL_LEADER, PAUSE, KILL_RESTART, WIPE, TRUNCATE, BITFLIP)
STORE_DAMAGE: Final = (WIPE, TRUNCATE, BITFLIP)


@dataclass
class Fault:
    kind: str
    member: str
    at: float  # time.monotonic() of the kill, stop or damage
    detail: str = ""
    back_s: float = 0.0  # until the member runs (or resumed) again


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def _until_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not _gone(pid):
        if time.monotonic() > deadline:
            raise EventloomError(f"pid {pid} still alive {timeout:g}s after SIGKILL")
        await asyncio.sleep(0.02)


async def follower(cluster: LocalCluster, client: Client, stream: str) -> str:
    """A member that does not lead `stream` (the minority a store fault is done to)."""
    leader = await stream_leader(client, stream)
    return next(s.name for s in cluster.servers() if s.name != leader)


async def kill_leader(cluster: LocalCluster, client: Client, stream: str) -> Fault:
    """kill -9 the stream's leader; the supervisor restarts it on its store."""
    leader = await stream_leader(client, stream)
    return await kill_restart(cluster, leader, kind=KILL_LEADER)


async def kill_restart(cluster: LocalCluster, member: str, *, kind: str = KILL_RESTART) -> Fault:
    """kill -9 `member` and let the node's supervisor start it again on its own store."""
    at = time.monotonic()
    pid = cluster.kill(member)
    server = await asyncio.to_thread(cluster.wait_restarted, member, pid)
    return Fault(kind, member, at, f"pid {pid} -> {server.pid}", time.monotonic() - at)


async def pause(cluster: LocalCluster, member: str, seconds: float) -> Fault:
    """SIGSTOP `member` for `seconds`, then SIGCONT: a server that hangs (GC, VM steal, a stuck disk)."""
    at = time.monotonic()
    pid = cluster.kill(member, sig=signal.SIGSTOP)
    try:
        await asyncio.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return Fault(PAUSE, member, at, f"SIGSTOP {seconds:g}s", time.monotonic() - at)


def stream_blocks(store_dir: Path, stream: str) -> list[Path]:
    """The message blocks of `stream` in one member's store, in block order."""
    found = (store_dir / "jetstream").glob(f"*/streams/{stream}/msgs/*.blk")
    return sorted(found, key=lambda p: int(p.stem) if p.stem.isdigit() else 0)


def wipe(store_dir: Path, stream: str) -> str:
    """The member's whole JetStream store is lost (a replaced disk)."""
    shutil.rmtree(store_dir, ignore_errors=True)
    return f"removed {store_dir.name}/"


def truncate(store_dir: Path, stream: str) -> str:
    """The last message block loses its second half (a torn write, a file system that lost its tail)."""
    block = _last_block(store_dir, stream)
    size = block.stat().st_size
    with open(block, "r+b") as file:
        file.truncate(size // 2)
    return f"{block.name}: {size} -> {size // 2} bytes"


def bitflip(store_dir: Path, stream: str, flips: int = 16, seed: int = 23) -> str:
    """`flips` bytes of the last message block inverted at random offsets (bit rot, a bad sector)."""
    block = _last_block(store_dir, stream)
    data = bytearray(block.read_bytes())
    offsets = sorted(random.Random(seed).sample(range(len(data)), min(flips, len(data))))
    for offset in offsets:
        data[offset] ^= 0xFF
    block.write_bytes(bytes(data))
    return f"{block.name}: {len(offsets)} bytes of {len(data)} inverted"


def _last_block(store_dir: Path, stream: str) -> Path:
    blocks = [b for b in stream_blocks(store_dir, stream) if b.stat().st_size > 0]
    if not blocks:
        raise EventloomError(f"no message block of {stream} under {store_dir}")
    return blocks[-1]


_DAMAGE: Final = {WIPE: wipe, TRUNCATE: truncate, BITFLIP: bitflip}


async def damage_store(cluster: LocalCluster, member: str, kind: str, stream: str) -> Fault:
    """kill -9 `member`, held down; damage its store (`kind`: wipe_store, truncate_blk, bitflip_blk);
    release it so the supervisor starts it on what is left."""
    at = time.monotonic()
    pid = cluster.kill(member, hold=True)
    try:
        await _until_gone(pid)
        store = Path(cluster.server(member).store_dir)
        detail = await asyncio.to_thread(_DAMAGE[kind], store, stream)
    finally:
        cluster.release(member)
    await asyncio.to_thread(cluster.wait_restarted, member, pid)
    return Fault(kind, member, at, detail, time.monotonic() - at)


async def inject(
    kind: str, cluster: LocalCluster, client: Client, stream: str, *, pause_s: float = 10.0
) -> Fault:
    """One fault of `kind`: the leader is killed or paused; a follower is killed or has its store damaged."""
    if kind == KILL_LEADER:
        return await kill_leader(cluster, client, stream)
    if kind == PAUSE:
        return await pause(cluster, await stream_leader(client, stream), pause_s)
    member = await follower(cluster, client, stream)
    if kind == KILL_RESTART:
        return await kill_restart(cluster, member)
    if kind in STORE_DAMAGE:
        return await damage_store(cluster, member, kind, stream)
    raise EventloomError(f"fault: unknown kind {kind!r} (one of {', '.join(KINDS)})")


async def settle(client: Client, stream: str, timeout: float = 90.0) -> float:
    """Seconds until the stream has a leader and every replica is current again. Asked with short waits:
    a leaderless stream leaves the request unanswered, and the usual 10 s wait would be counted."""
    started = time.monotonic()
    seen: dict[str, Any] = {}
    while time.monotonic() - started < timeout:
        try:
            info = await jetstream_api(client, f"STREAM.INFO.{stream}", timeout=1.0)
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            info = {}
        seen = info.get("cluster") or {}
        replicas = seen.get("replicas") or []
        wanted = (info.get("config") or {}).get("num_replicas", 1)
        current = all(r.get("current") and not r.get("lag") for r in replicas)
        if seen.get("leader") and len(replicas) + 1 >= wanted and current:
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise EventloomError(f"stream {stream}: replicas not current within {timeout:g}s: {seen}")


class AppendingClient:
    """tests/durability_client.py appending with idempotency keys until `stop()`, each acknowledgement
    recorded with its times in `<root>/acked.txt` (read it with `tests.cluster_checks.read_acks`)."""

    def __init__(
        self, root: Path, data_dir: Path, url: str, *, sessions: int = 4, deadline: float = 600
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.acked_path = root / "acked.txt"
        self.stop_path = root / "stop"
        self.out_path, self.err_path = root / "client.out", root / "client.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.process = subprocess.Popen(
                [
                    sys.executable, str(CLIENT), "--data-dir", str(data_dir), "--url", url,
                    "--acked", str(self.acked_path), "--count", "10000000", "--sessions", str(sessions),
                    "--prefix", root.name, "--deadline", str(deadline), "--times",
                    "--stop-file", str(self.stop_path),
                ],
                stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            )  # fmt: skip

    def acked_count(self) -> int:
        try:
            return self.acked_path.read_bytes().count(b"\n")
        except OSError:
            return 0

    async def wait_for_acks(self, count: int, timeout: float = 120.0) -> None:
        """Until `count` acknowledgements in all (the client must still be running)."""
        deadline = time.monotonic() + timeout
        while self.acked_count() < count:
            if self.process.poll() is not None:
                raise EventloomError(
                    f"the appending client exited ({self.process.returncode}): {self.stderr()}"
                )
            if time.monotonic() > deadline:
                raise EventloomError(f"{count} acknowledgements not reached within {timeout:g}s")
            await asyncio.sleep(0.05)

    async def stop(self, timeout: float = 60.0) -> dict[str, object]:
        """Let each session finish its current append, then the client's summary line."""
        self.stop_path.touch()
        try:
            code = await asyncio.to_thread(self.process.wait, timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise EventloomError(f"the appending client did not stop within {timeout:g}s") from None
        lines = self.out_path.read_text().strip().splitlines()
        summary: dict[str, object] = json.loads(lines[-1]) if lines else {}
        if code != 0:
            raise EventloomError(f"the appending client failed ({code}) {summary}: {self.stderr()}")
        return summary

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")[-3000:]

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
