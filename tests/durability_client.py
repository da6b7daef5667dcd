"""A client that keeps appending while the test kills things underneath it (run by test_durability).

It appends `--count` events of ~1 KB across `--sessions` sessions (one task per session, sequential within a
session, sessions concurrent) over one persistent, reconnecting connection. Every append carries the
idempotency key `<session>-<i>`, so retrying an append whose outcome is unknown (the server died before or
after storing it) can never store it twice. Any exception is retried after 0.1 s until `--deadline` seconds
have passed since the start.

After every acknowledged append it writes `<session> <seq> <hash>` to the `--acked` file and flushes, so the
test knows exactly which events the log promised to keep, even if this process is killed too. With `--times`
each line also carries when the acknowledged append call began and when it returned (`time.monotonic()`,
which is one clock for every process on the machine: the fault benchmark compares them with its kill times).
With `--stop-file`, the sessions stop (each after its current append) once that file exists. It ends with
one JSON line on stdout: {"acked": n, "retries": n, "errors": {...}, "elapsed_s": s}; exit code 0 only if
every event was acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import IO

import msgspec

from eventloom.log import EventLog
from eventloom.settings import Settings

EVENT_TYPE = "x.durability.probe"
ACTOR = "durability-client"
RETRY_SLEEP_S = 0.1
FILLER_CHARS = 1000


def payload_for(session: str, index: int) -> dict[str, object]:
    """Deterministic ~1 KB payload; `i` lets the test check each event is stored exactly once."""
    seed = hashlib.sha256(f"{session}/{index}".encode()).hexdigest()
    filler = (seed * (FILLER_CHARS // len(seed) + 1))[:FILLER_CHARS]
    return {"i": index, "session": session, "filler": filler}


class Client:
    def __init__(
        self, log: EventLog, acked: IO[str], deadline: float, *, times: bool = False, stop: Path | None = None
    ) -> None:
        self.log = log
        self.acked_file = acked
        self.deadline = deadline
        self.times = times
        self.stop = stop
        self.acked = 0
        self.retries = 0
        self.errors: Counter[str] = Counter()

    async def run_session(self, session: str, count: int) -> None:
        for index in range(count):
            if self.stop is not None and self.stop.exists():
                return
            await self.append_until_acked(session, index)

    async def append_until_acked(self, session: str, index: int) -> None:
        payload = payload_for(session, index)
        while True:
            began = time.monotonic()
            try:
                event = await self.log.append(
                    session, EVENT_TYPE, ACTOR, payload, idempotency_key=f"{session}-{index}"
                )
            except Exception as exc:  # the server may be gone, restarting, or recovering: retry anything
                self.retries += 1
                self.errors[type(exc).__name__] += 1
                if time.monotonic() >= self.deadline:
                    raise TimeoutError(f"{session}-{index}: still failing at the deadline: {exc!r}") from exc
                await asyncio.sleep(RETRY_SLEEP_S)
                continue
            when = f" {began:.6f} {time.monotonic():.6f}" if self.times else ""
            self.acked_file.write(f"{event.session} {event.seq} {event.hash}{when}\n")
            self.acked_file.flush()
            self.acked += 1
            return


async def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    deadline = started + args.deadline
    settings = Settings(data_dir=Path(args.data_dir), nats_url=args.url)
    sessions = [f"{args.prefix}-{k}" for k in range(args.sessions)]
    per_session = [
        args.count // args.sessions + (1 if k < args.count % args.sessions else 0)
        for k in range(args.sessions)
    ]
    log = None
    while log is None:  # the node may still be coming up
        try:
            log = await EventLog.open(settings)
        except Exception:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(RETRY_SLEEP_S)
    ok = False
    with open(args.acked, "a", encoding="utf-8") as acked:
        stop = Path(args.stop_file) if args.stop_file else None
        client = Client(log, acked, deadline, times=args.times, stop=stop)
        try:
            await asyncio.gather(
                *(client.run_session(s, n) for s, n in zip(sessions, per_session, strict=True))
            )
            ok = True
        finally:
            summary = {
                "acked": client.acked,
                "retries": client.retries,
                "errors": dict(client.errors),
                "elapsed_s": round(time.monotonic() - started, 3),
                "ok": ok,
            }
            sys.stdout.write(msgspec.json.encode(summary).decode() + "\n")
            sys.stdout.flush()
            with contextlib.suppress(Exception):  # best effort: the result is already recorded
                await asyncio.wait_for(log.close(), timeout=5)
    return 0 if ok else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir", required=True, help="the node's data dir (its signing key is used)")
    parser.add_argument("--url", required=True, help="NATS URL; the client reconnects to this same URL")
    parser.add_argument("--acked", required=True, help="file that gets one `session seq hash` line per ack")
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--prefix", default="durability")
    parser.add_argument("--times", action="store_true", help="add `began acked` (monotonic) to each line")
    parser.add_argument("--stop-file", help="stop appending once this file exists (with a large --count)")
    parser.add_argument("--deadline", type=float, default=120.0, help="give up after this many seconds")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(asyncio.run(main(parse_args())))
