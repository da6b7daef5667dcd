"""Read your own writes: append, then at once ask for what was appended, with and without `after`.

Prints exactly one JSON object on stdout; progress goes to stderr.

    python bench/read_your_writes.py              # 200 rounds against a node of its own (embedded NATS)
    python bench/read_your_writes.py --rounds 50

A node runs in its own process, as `eventloom up` runs it (the graph, keyword, vector and inferred
projectors, the query service; no producers). This process appends with an `EventLog` and asks through
`MemoryClient` over NATS, as an agent's gateway does. Each round appends a turn carrying a word no other
event has, then at once queries that word in the session:

- `without_after` (the first `--baseline` rounds): the query asks nothing of the read models; `seen` is
  whether the appended event is cited in the answer. This is the problem `after` solves.
- with `after` (every round): the query gives the append's position; `seen` is the same check, `wait_ms`
  is what the query service reports having waited (`consistency.waited_ms`), `read_ms` the whole round
  trip of the query as the caller sees it.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, percentiles, progress_bar, server_binary_version

from eventloom.log import EventLog
from eventloom.position import Appended
from eventloom.request import AppendRequest
from eventloom.settings import DEFAULT_PROJECTOR_LINGER_MS, Settings
from gateway.node_process import NodeProcess
from readmodels.consistency import MAX_AFTER_WAIT_MS
from readmodels.query.client import MemoryClient
from readmodels.retrieval.model import Query, QueryResult

SESSION = "ryw"
WARMUP_ROUNDS = 6
"""The first read waits for the node's projectors to open their read models, not for one event: it is
asked again (10 s each, the longest `after_wait_ms`) until they have."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help="append-then-read rounds (default 200)")
    parser.add_argument(
        "--baseline", type=int, default=50, help="rounds first read without `after` as well (default 50)"
    )
    parser.add_argument(
        "--linger-ms",
        type=int,
        default=DEFAULT_PROJECTOR_LINGER_MS,
        help=f"the node's EVENTLOOM_PROJECTOR_LINGER_MS (default {DEFAULT_PROJECTOR_LINGER_MS})",
    )
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def append_turn(log: EventLog, word: str) -> Appended:
    request = AppendRequest(
        session=SESSION,
        type="transcript.turn",
        actor="user",
        payload={"role": "user", "text": f"we saw {word}"},
    )
    (appended,) = await log.append_positioned([request])
    return appended


def cites(result: QueryResult, appended: Appended) -> bool:
    return appended.event.citation in {c.uri for hit in result.hits for c in hit.citations}


async def warm_up(log: EventLog, memory: MemoryClient) -> None:
    """Until the node's read models answer: a first append read with a long `after` wait."""
    appended = await append_turn(log, "warmup" + secrets.token_hex(4))
    query = Query(text="warmup", session=SESSION, after=appended.position, after_wait_ms=MAX_AFTER_WAIT_MS)
    for _ in range(WARMUP_ROUNDS):
        result = await memory.query(query)
        if result.consistency is not None and not result.consistency.lagging:
            return
    raise RuntimeError(f"the node's read models did not catch up: {result.consistency}")


async def rounds(log: EventLog, memory: MemoryClient, args: argparse.Namespace) -> dict[str, Any]:
    seen_without: list[bool] = []
    seen: list[bool] = []
    waits: list[float] = []
    reads: list[float] = []
    lagging: list[dict[str, Any]] = []
    with progress_bar() as progress:
        bar = progress.add_task("append, then read", total=args.rounds, rate="")
        for index in range(args.rounds):
            word = f"ryw{index}x{secrets.token_hex(4)}"
            appended = await append_turn(log, word)
            if index < args.baseline:
                seen_without.append(cites(await memory.query(Query(text=word, session=SESSION)), appended))
            started = time.perf_counter()
            result = await memory.query(Query(text=word, session=SESSION, after=appended.position))
            reads.append((time.perf_counter() - started) * 1000)
            assert result.consistency is not None  # asked with `after`
            waits.append(result.consistency.waited_ms)
            seen.append(cites(result, appended))
            if result.consistency.lagging:
                lagging.append(msgspec.to_builtins(result.consistency))
            progress.advance(bar)
    return {
        "seen_fraction": round(sum(seen) / len(seen), 4),
        "wait_ms_p50": round(statistics.median(waits), 1),
        "wait_ms_p95": percentiles(waits)["p95"],
        "wait_ms": percentiles(waits),
        "read_ms": percentiles(reads),
        "lagging_answers": lagging[:5],
        "lagging_count": len(lagging),
        "without_after": {
            "n": len(seen_without),
            "seen_fraction": round(sum(seen_without) / len(seen_without), 4) if seen_without else None,
        },
    }


async def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    settings = Settings(data_dir=root / "data", producers="none", projector_linger_ms=args.linger_ms)
    node = NodeProcess(settings)
    info = node.start()
    try:
        async with await EventLog.open(Settings(data_dir=settings.data_dir, nats_url=info.nats_url)) as log:
            memory = MemoryClient(log.client)
            console.print("warm-up: the node's read models open")
            await warm_up(log, memory)
            return await rounds(log, memory, args)
    finally:
        node.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = datetime.now(UTC)
    root = Path(tempfile.mkdtemp(prefix="eventloom-bench-ryw-"))
    try:
        measured = asyncio.run(bench(args, root))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = {
        "benchmark": "read_your_writes",
        "n": args.rounds,
        "projector_linger_ms": args.linger_ms,
        **measured,
        "goals": {
            "seen_fraction_1": measured["seen_fraction"] == 1.0,
            "wait_ms_p95_lt_300": measured["wait_ms_p95"] < 300,
        },
        "machine": machine(server_binary_version()),
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/read_your_writes.py " + " ".join(sys.argv[1:] if argv is None else argv),
    }
    sys.stdout.write(msgspec.json.encode(report).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
