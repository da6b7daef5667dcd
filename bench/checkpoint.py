"""What a LadybugDB checkpoint of the temporal graph costs, and whether questions wait; one JSON object.

No bus: events of bench/corpus.py's query corpus are built in memory (hash-chained, unsigned), extracted and
applied to a `LadybugGraphStore` as the projector applies them, up to each size. Then, per size:
  1. a trickle: `--commits` commits of `--per-commit` events each, none checkpointed (the write per commit);
  2. four askers read through the store (a session's relations, a name's neighbours two hops out) while the
     store checkpoints those commits: read latency before, during and after the checkpoint;
  3. the relationship tables' row counts, which the checkpoint's cost follows.
And once, on a synthetic relationship table of `--synthetic-rows` rows: the checkpoint after one inserted
relationship, with 8 STRING properties, 8 INT64 properties and none. The engine rewrites the string columns
of a relationship table's whole node group whenever a checkpoint touches it, so the cost grows with the
table, not with what was committed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import ladybug
import pyarrow as pa
from common import console, percentiles, print_report, progress_bar
from corpus import Corpus
from graph_rows import chained

from eventloom.event import Event
from projectors.graph.registry import extract
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.embedded.ladybug_checkpoints import CheckpointPolicy
from readmodels.embedded.ladybug_io import open_database

BUILD_BATCH = 500
ASKERS = 4
QUIET_S = 2.0
NEVER = 10**12
CHECKPOINT_WHEN_IDLE = CheckpointPolicy(
    wal_bytes=NEVER, commits=NEVER, events=NEVER, idle_wal_bytes=NEVER, idle_commits=1, idle_events=NEVER,
    reopen_events=NEVER,
)  # fmt: skip
"""Commits are never checkpointed; the first `idle()` after one is."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,40000", help="graph sizes in events, ascending")
    parser.add_argument("--commits", type=int, default=20, help="trickle commits before the checkpoint")
    parser.add_argument("--per-commit", type=int, default=3, help="events per trickle commit (default 3)")
    parser.add_argument("--synthetic-rows", type=int, default=40_000, help="rows of the synthetic table")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def corpus_events(count: int) -> tuple[Corpus, list[Event]]:
    corpus = Corpus(seed=7, sessions=16)
    tips: dict[str, Event] = {}
    events: list[Event] = []
    for n in range(count):
        asked = corpus.event(n)
        event = tips[asked.session] = chained(tips.get(asked.session), asked)
        events.append(event)
    return corpus, events


async def build(path: Path, events: list[Event]) -> float:
    """Project `events` with the store's default checkpoints, as a running projector does; seconds."""
    started = time.perf_counter()
    async with LadybugGraphStore(path) as store:
        with progress_bar() as progress:
            task = progress.add_task(f"graph of {len(events):,}", total=len(events), rate="")
            for start in range(0, len(events), BUILD_BATCH):
                batch = events[start : start + BUILD_BATCH]
                await store.apply("graph", [extract(event) for event in batch])
                progress.update(task, advance=len(batch))
    return time.perf_counter() - started


async def ask(
    store: LadybugGraphStore, corpus: Corpus, first: int, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """(started, seconds) of each read, until `stop`: relations of a session, or a name's neighbours."""
    timed: list[tuple[float, float]] = []
    n = first
    while not stop.is_set():
        session = corpus.sessions[n % len(corpus.sessions)]
        started = time.perf_counter()
        if n % 2:
            await store.relations(session)
        else:
            await store.neighbours(session, corpus.names[n % 50], depth=2)
        timed.append((started, time.perf_counter() - started))
        n += ASKERS
    return timed


async def rel_rows(store: LadybugGraphStore) -> dict[str, int]:
    tables = await store.query("CALL show_tables() RETURN name, type")
    counts: dict[str, int] = {}
    for table in sorted(str(row["name"]) for row in tables if row["type"] == "REL"):
        rows = await store.query(f"MATCH ()-[r:`{table}`]->() RETURN count(*) AS n")
        counts[table] = int(rows[0]["n"])
    return counts


async def measure(path: Path, corpus: Corpus, trickle: list[Event], per_commit: int) -> dict[str, Any]:
    async with LadybugGraphStore(path, checkpoints=CHECKPOINT_WHEN_IDLE) as store:
        commit_ms: list[float] = []
        for start in range(0, len(trickle), per_commit):
            started = time.perf_counter()
            await store.apply("graph", [extract(event) for event in trickle[start : start + per_commit]])
            commit_ms.append((time.perf_counter() - started) * 1000)
        stop = asyncio.Event()
        askers = [asyncio.create_task(ask(store, corpus, k, stop)) for k in range(ASKERS)]
        await asyncio.sleep(QUIET_S)
        began = time.perf_counter()
        await store.idle()
        ended = time.perf_counter()
        await asyncio.sleep(QUIET_S)
        stop.set()
        reads = [read for timed in await asyncio.gather(*askers) for read in timed]
        if "checkpoint" not in store.stages.seconds:
            raise RuntimeError("the store did not checkpoint when idle")
        phases = {
            "before": [s for at, s in reads if at < began],
            "during": [s for at, s in reads if began <= at <= ended],
            "after": [s for at, s in reads if at > ended],
        }
        return {
            "trickle_commits": len(commit_ms),
            "commit_ms": percentiles(commit_ms),
            "checkpoint_s": round(ended - began, 3),
            "reads_ms": {
                phase: {"count": len(seconds), **percentiles([s * 1000 for s in seconds])}
                if seconds
                else None
                for phase, seconds in phases.items()
            },
            "rel_rows": await rel_rows(store),
        }


def synthetic(rows: int, root: Path) -> dict[str, float]:
    """Milliseconds of a checkpoint after one relationship inserted into a table of `rows` (median of 3)."""
    costs: dict[str, float] = {}
    for name, columns in (("none", ""), ("int64_x8", "INT64"), ("string_x8", "STRING")):
        path = root / f"synthetic-{name}.lbug"
        database = open_database(str(path), auto_checkpoint=False)
        connection = ladybug.Connection(database)
        connection.execute("CREATE NODE TABLE N(id INT64, PRIMARY KEY(id))")
        properties = [f"p{i}" for i in range(8)] if columns else []
        declared = "".join(f", {p} {columns}" for p in properties)
        connection.execute(f"CREATE REL TABLE R(FROM N TO N{declared})")
        nodes = pa.table({"r": pa.array([{"id": i} for i in range(rows + 1)])})
        connection.execute("LOAD FROM $rows CREATE (:N {id: r.id})", {"rows": nodes})
        values = [
            {"a": i, "b": i + 1, **{p: (f"v{p}-{i}" if columns == "STRING" else i) for p in properties}}
            for i in range(rows)
        ]
        assigned = ", ".join(f"{p}: r.{p}" for p in properties)
        connection.execute(
            f"LOAD FROM $rows MATCH (a:N {{id: r.a}}), (b:N {{id: r.b}}) CREATE (a)-[:R {{{assigned}}}]->(b)",
            {"rows": pa.table({"r": pa.array(values)})},
        )
        connection.execute("CHECKPOINT")
        timings: list[float] = []
        for n in range(3):
            connection.execute("MATCH (a:N {id: $a}), (b:N {id: 0}) CREATE (a)-[:R]->(b)", {"a": 5 + n})
            started = time.perf_counter()
            connection.execute("CHECKPOINT")
            timings.append((time.perf_counter() - started) * 1000)
        costs[name] = round(statistics.median(timings), 1)
        connection.close()
        database.close()
    return costs


async def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    sizes = [int(size) for size in args.sizes.split(",")]
    trickle_length = args.commits * args.per_commit
    corpus, events = corpus_events(sizes[-1] + trickle_length)
    result: dict[str, Any] = {}
    for size in sizes:
        path = root / f"graph-{size}.lbug"
        seconds = await build(path, events[:size])
        console.print(
            f"{size:,} events projected in {seconds:.1f} s; a trickle, then a checkpoint while asked"
        )
        point = await measure(path, corpus, events[size : size + trickle_length], args.per_commit)
        result[str(size)] = {"build_s": round(seconds, 1), **point}
        console.print(
            f"  checkpoint {point['checkpoint_s']} s, reads during it {point['reads_ms']['during']}"
        )
        shutil.rmtree(path, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "checkpoint",
        "command": "python bench/checkpoint.py " + " ".join(sys.argv[1:]),
    }
    with tempfile.TemporaryDirectory(prefix="eventloom-checkpoint-") as tmp:
        result["sizes"] = asyncio.run(bench(args, Path(tmp)))
        console.print(f"synthetic relationship table of {args.synthetic_rows:,} rows")
        result["synthetic_checkpoint_ms"] = {
            "rows": args.synthetic_rows,
            **synthetic(args.synthetic_rows, Path(tmp)),
        }
    print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
