"""Rows the temporal graph writes per event as the log grows; prints one JSON object (progress on stderr).

No database and no bus: events are built in memory (hash-chained; unsigned, as nothing here checks them),
extracted, and resolved by the bulk planner (`readmodels.graph.bulk.resolve.BulkPlanner`, the rebuild's
resolution), for each prefix of the log; the rows it writes are counted per table. Two logs: `bench/load.py`'s
projection load (a fixed set of services and teams, tasks and decisions) and `bench/corpus.py`'s query
corpus (2,000 names drawn from a Pareto law, so a few names are in half of all facts). Relations join
entities, not versions, so an entity revised often and related to many others costs one row per relation:
both logs' rows per event stay flat as they grow (when relations joined versions and were copied to each new
one, the second log's grew with its length).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from common import console, print_report, progress_bar
from corpus import Corpus
from load import realistic

from eventloom.event import Event, compute_hash, utc_timestamp
from eventloom.request import AppendRequest
from projectors.graph.registry import extract
from readmodels.graph.bulk.resolve import BulkPlanner
from readmodels.graph.bulk.tables import copy_tables
from readmodels.graph.model import EventProjection

LOGS: dict[str, Callable[[int], AppendRequest]] = {
    "projection_load": lambda n: realistic(f"s{n % 8}", n // 8),
    "query_corpus": Corpus().event,
}


T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chained(previous: Event | None, asked: AppendRequest) -> Event:
    """The next event of `asked.session` after `previous`, one second later, as the appender chains it."""
    seq = previous.seq + 1 if previous else 1
    draft = Event(
        v=1,
        session=asked.session,
        seq=seq,
        ts=utc_timestamp(T0 + timedelta(seconds=seq)),
        type=asked.type,
        actor=asked.actor,
        payload=asked.payload,
        caused_by=[],
        prev_hash=previous.hash if previous else None,
        hash="",
        sig="",
        key_id="",
    )
    return msgspec.structs.replace(draft, hash=compute_hash(draft))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="log length (default 100000)")
    parser.add_argument(
        "--checkpoints", type=int, default=2, help="prefixes of the log measured (default 2: half, all)"
    )
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def measure(name: str, request: Callable[[int], AppendRequest], events: int, checkpoints: int) -> list[Any]:
    """Exact rows for each prefix of the log (a fresh plan per prefix, finished), and the rows per event
    the events between two prefixes added."""
    tips: dict[str, Event] = {}
    extracted: list[EventProjection] = []
    with progress_bar() as progress:
        task = progress.add_task(f"{name}: extract", total=events, rate="")
        for n in range(events):
            asked = request(n)
            event = tips[asked.session] = chained(tips.get(asked.session), asked)
            extracted.append(extract(event))
            if n % 1000 == 0:
                progress.update(task, completed=n)
    points: list[dict[str, Any]] = []
    previous_events = previous_rows = 0
    for size in (events * (i + 1) // checkpoints for i in range(checkpoints)):
        console.print(f"{name}: resolving the first {size} events")
        planner = BulkPlanner()
        rows: Counter[str] = Counter()
        for start in range(0, size, 1000):
            planner.add(extracted[start : min(start + 1000, size)])
            rows.update(_counted(planner.take_finished()))
        rows.update(_counted(planner.finish()))
        total = sum(rows.values())
        edges = sum(v for k, v in rows.items() if k.startswith("edges:"))
        points.append(
            {
                "events": size,
                "rows_per_event": round(total / size, 2),
                "rows_per_event_added": round((total - previous_rows) / (size - previous_events), 2),
                "edge_rows_per_event": round(edges / size, 2),
            }
        )
        previous_events, previous_rows = size, total
    return points


def _counted(plan: Any) -> Counter[str]:
    counted: Counter[str] = Counter()
    for target, table in copy_tables(plan, "graph").items():
        kind = "edges" if target.typed or target.table == "RELATES" else "other"
        counted[f"{kind}:{target.table}"] += table.num_rows
    return counted


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result: dict[str, Any] = {"benchmark": "graph_rows", "events": args.events}
    for name, request in LOGS.items():
        console.print(f"{name}: {args.events} events")
        result[name] = measure(name, request, args.events, args.checkpoints)
    print_report(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
