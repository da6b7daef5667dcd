"""Agent workflow runs on the graph (issue 21): projection rate and read latency on LadybugDB and Neo4j.

The load (bench/workflow_fixture.py): `--runs` runs of `--messages` messages each (tool pairs, one failing
call in ten, a plan with an edited second version and its reviews, a pull request for one run in four),
`--concurrent` runs interleaved. For each backend, in this process:
  1. `translate`: the pure translation of every event into its operations (the ceiling for what follows);
  2. `projection`: the workflow projector applies the events in batches of `--batch`, as its runner does
     (translation, then one transaction per batch with the checkpoints), into a fresh store;
  3. reads, each on `--samples` random runs or issues: the complete ordered sequence of a run, the latest
     runs for an issue (limit 10), the conversation without tool traffic, failed tool calls of a run, a
     plan's version and review history. Latencies in ms (p50/p95/max), store call to decoded answer.
Neo4j comes from `NEO4J_URI`, else is provisioned as the tests do; a backend that cannot be had is named in
`not_measured`. Top-level keys are the worst over the backends measured; each one's own under `backends`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import machine, percentiles, progress_bar, server_binary_version
from workflow_fixture import issue_key, runs

from eventloom.event import Event
from eventloom.settings import Settings
from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore
from gateway.packs.workflow.neo4j_store import neo4j_workflow_store
from gateway.packs.workflow.reads import (
    IssueRunsQuestion,
    PlanQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
    WorkflowReads,
)
from gateway.packs.workflow.translate import changes
from projectors.tracking import TrackingProjector
from readmodels.neo4j.local import Neo4jUnavailable, provision_neo4j

PROJECTOR = "workflow"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=20, help="messages per run (a tool pair counts 2)")
    parser.add_argument("--concurrent", type=int, default=8, help="runs interleaved at a time")
    parser.add_argument("--batch", type=int, default=500, help="events per projection batch")
    parser.add_argument("--samples", type=int, default=300, help="reads of each kind")
    parser.add_argument("--backend", choices=("ladybug", "neo4j", "both"), default="both")
    return parser.parse_args(argv)


async def timed(samples: Sequence[Any], ask: Callable[[Any], Awaitable[Any]]) -> dict[str, float]:
    latencies = []
    for sample in samples:
        started = time.perf_counter()
        answer = await ask(sample)
        latencies.append((time.perf_counter() - started) * 1000)
        if answer is None or answer == []:
            raise RuntimeError(f"empty answer for {sample!r}: the projection is incomplete")
    return percentiles(latencies)


async def measure_reads(store: WorkflowReads, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(11)
    run_ids = [f"run-{rng.randrange(args.runs) + 1:06d}" for _ in range(args.samples)]
    issues = [issue_key(rng.randrange(max(1, args.runs // 5))) for _ in range(args.samples)]
    sequence = await timed(run_ids, lambda r: store.sequence(SequenceQuestion(run_id=r)))
    lengths = {len(await store.sequence(SequenceQuestion(run_id=r))) for r in run_ids[:20]}
    return {
        "sequence_ms": sequence,
        "sequence_lengths_seen": sorted(lengths),
        "issue_runs_ms": await timed(
            issues, lambda i: store.issue_runs(IssueRunsQuestion(issue=i, limit=10))
        ),
        "conversation_ms": await timed(
            run_ids, lambda r: store.sequence(SequenceQuestion(run_id=r, conversation=True))
        ),
        "failed_tool_calls_ms": await timed(
            run_ids[: args.samples // 3],
            lambda r: store.tool_calls(ToolCallsQuestion(run_id=r)),
        ),
        "plan_history_ms": await timed(run_ids, lambda r: store.plan(PlanQuestion(plan_id=f"{r}-plan2"))),
    }


async def project(store: Any, events: list[Event], batch: int) -> float:
    projector = TrackingProjector(PROJECTOR, store, changes)
    started = time.perf_counter()
    with progress_bar() as bar:
        task = bar.add_task("projecting", total=len(events), rate="")
        for first in range(0, len(events), batch):
            await projector.apply(events[first : first + batch])
            done = min(len(events), first + batch)
            bar.update(task, completed=done, rate=f"{done / (time.perf_counter() - started):,.0f} ev/s")
    return time.perf_counter() - started


async def run_backend(name: str, events: list[Event], args: argparse.Namespace) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        store = await open_store(name, stack)
        seconds = await project(store, events, args.batch)
        reads = await measure_reads(store, args)
        return {
            "projection_seconds": round(seconds, 1),
            "projection_events_per_s": round(len(events) / seconds, 1),
            "sequence_p95_ms": reads["sequence_ms"]["p95"],
            "issue_runs_p95_ms": reads["issue_runs_ms"]["p95"],
            "reads": reads,
        }


async def open_store(name: str, stack: AsyncExitStack) -> Any:
    if name == "ladybug":
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eventloom-bench-workflow-")))
        store: Any = LadybugWorkflowStore(directory / "workflow.lbug")
        await store.open()
    else:
        endpoint = stack.enter_context(provision_neo4j())
        settings = replace(
            Settings(data_dir=Path(tempfile.gettempdir())),
            graph_backend="neo4j",
            neo4j_uri=endpoint.uri,
            neo4j_user=endpoint.user,
            neo4j_password=endpoint.password,
        )
        store = neo4j_workflow_store(settings)
        await store.open()
        await store.clear()
    stack.push_async_callback(store.close)
    return store


def translate_rate(events: list[Event]) -> float:
    started = time.perf_counter()
    operations = sum(len(changes(event).operations) for event in events)
    elapsed = time.perf_counter() - started
    print(f"translated {len(events):,} events into {operations:,} operations", file=sys.stderr)
    return len(events) / elapsed


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    names = ["ladybug", "neo4j"] if args.backend == "both" else [args.backend]
    events = list(runs(args.runs, args.messages, args.concurrent))
    report: dict[str, Any] = {
        "benchmark": "workflow",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(server_binary_version()),
        "runs": args.runs,
        "messages_per_run": args.messages,
        "events": len(events),
        "translate_events_per_s": round(translate_rate(events), 1),
        "backends": {},
        "not_measured": {},
    }
    for name in names:
        try:
            report["backends"][name] = await run_backend(name, events, args)
        except Neo4jUnavailable as exc:
            report["not_measured"][name] = str(exc)
    measured = list(report["backends"].values())
    if measured:
        report["projection_events_per_s"] = min(b["projection_events_per_s"] for b in measured)
        report["sequence_p95_ms"] = max(b["sequence_p95_ms"] for b in measured)
        report["issue_runs_p95_ms"] = max(b["issue_runs_p95_ms"] for b in measured)
    return report


if __name__ == "__main__":
    sys.stdout.write(msgspec.json.encode(asyncio.run(main())).decode() + "\n")
