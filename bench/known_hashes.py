"""Memory the consumers of one node spend remembering verified hashes; prints one JSON object.

Every consumer remembers the hash of each event it verified, so a later citation of it (or the first event
of a session it meets mid-way) needs no read from the stream. `--consumers` consumers (a node runs six
projectors and one producer consumer) each decode and verify their own copy of `--events` events of 16
sessions; the Python memory they hold afterwards (`tracemalloc`) is measured twice: each consumer with a
`KnownHashes` of its own, and all of them sharing one, as `EventLog.known_hashes` is in a node.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import tracemalloc
from typing import Any

import msgspec
from common import progress_bar

from eventloom.citations import KnownHashes

SESSIONS = 16


class _Verified(msgspec.Struct):
    """What `CitationChecker.saw` reads of an event."""

    session: str
    seq: int
    hash: str


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events each consumer verifies (100000)")
    parser.add_argument("--consumers", type=int, default=7, help="consumers in the process (7, a node's)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def _messages(count: int) -> list[bytes]:
    return [
        msgspec.json.encode(
            {
                "session": f"agent-session-{n % SESSIONS:02d}",
                "seq": n // SESSIONS + 1,
                "hash": hashlib.sha256(n.to_bytes(8, "big")).hexdigest(),
            }
        )
        for n in range(count)
    ]


def held_mb(messages: list[bytes], consumers: int, shared: bool) -> float:
    """MB held once every consumer has seen every message (each decodes its own copy, as on the bus)."""
    tracemalloc.start()
    try:
        one = KnownHashes()
        remembered = [one if shared else KnownHashes() for _ in range(consumers)]
        label = "shared" if shared else "one each"
        with progress_bar() as progress:
            task = progress.add_task(
                f"{consumers} consumers, {label}", total=consumers * len(messages), rate=""
            )
            for known in remembered:
                for message in messages:  # what `CitationChecker.saw` records of each verified event
                    event = msgspec.json.decode(message, type=_Verified)
                    known.remember(event.session, event.seq, event.hash)
                progress.advance(task, len(messages))
        held, _ = tracemalloc.get_traced_memory()
        return round(held / 1e6, 1)
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    messages = _messages(args.events)
    started = time.perf_counter()
    each = held_mb(messages, args.consumers, shared=False)
    shared = held_mb(messages, args.consumers, shared=True)
    return {
        "benchmark": "known_hashes",
        "events": args.events,
        "consumers": args.consumers,
        "mb_one_each": each,
        "mb_shared": shared,
        "bytes_per_event_shared": round(shared * 1e6 / args.events),
        "seconds": round(time.perf_counter() - started, 1),
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    print(json.dumps(main()))
