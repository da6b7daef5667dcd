"""Derived memory you can trust, measured on a generated fixture; prints one JSON object (progress on stderr).

For each graph backend (LadybugDB embedded, Neo4j), on a real embedded nats-server:
  1. the node's workers start as `eventloom up` starts them: the built-in producers on one shared consumer
     (`gateway.workers.producer_runner`), and the graph, keyword, vector and inferred projectors;
  2. the fixture (bench/derived_fixture.py: causal chains, stale distractors, repeated claims and procedures,
     episodes, entity name variants and near misses) is appended, and everything runs until the log and
     every consumer are quiet; then, as reviewers and agents would, stale edges are contradicted, stale
     outcomes invalidated and candidates reviewed (`gateway.consolidation.review`, which promotes what it
     accepts), and everything runs until quiet again;
  3. measured through the reads the CLI and MCP tools use (`LocalMemory`, bench/derived_checks.py): causal
     recall of the true links by successors, predecessors, explain and path; stale distractors not returned
     as current; citation fidelity of every candidate and derived edge in the log (bench/derived_fidelity.py
     says what "says what is claimed" means for each kind); entity-resolution precision and recall against
     the fixture's spellings; pending, deferred or rejected candidates found among a checkout's facts.
`seconds`: `append` (the fixture), `derive_and_project` (from the last append until quiet),
`second_phase` (contradictions, invalidations and reviews until quiet), `measure` (every read above).
Neo4j comes from `NEO4J_URI`, else is provisioned as the tests do (`--backend ladybug` skips it).
Top-level metrics are the worst over the backends measured; each backend's own are under `backends`; a
backend that could not be had is named in `not_measured` with the reason (its metrics left out). A metric
that could not be measured is null with `<key>_reason`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, progress_bar, server_binary_version
from derived_checks import candidate_checkouts, causal_recall, entity_resolution, stale_rejected
from derived_fidelity import LogIndex, citation_fidelity
from derived_fixture import Events, Fixture, Script, generate
from query import backend_settings

from eventloom.bus.embedded import EmbeddedNats
from eventloom.dlq import list_dead_letters
from eventloom.event import utc_timestamp
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.consolidation import review
from gateway.memory_role import LiveReadModels
from gateway.workers import enabled_producers, producer_runner, projector_runner
from projectors.plugins import PRODUCERS_GROUP, available
from projectors.runner import ProjectorRunner
from readmodels.neo4j.local import Neo4jUnavailable
from readmodels.query.local import LocalMemory

PROJECTORS = ("graph", "keyword", "vector", "inferred")
REVIEWER = "agent:reviewer"
METRICS = (
    "causal_recall_successors",
    "causal_recall_predecessors",
    "causal_recall_explain",
    "causal_path_found",
    "stale_causal_rejected",
    "citation_fidelity",
    "entity_resolution_precision",
    "entity_resolution_recall",
)


def builtin_producers() -> list[str]:
    """The producers this package ships (other installed plug-ins, e.g. the tests' samples, left out)."""
    return sorted(
        entry.name
        for entry in available(PRODUCERS_GROUP).values()
        if entry.dist is not None and entry.dist.name == "eventloom-memory"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=40, help="agent sessions in the fixture (default 40)")
    parser.add_argument("--seed", type=int, default=20, help="the fixture's seed (default 20)")
    parser.add_argument("--backend", choices=("ladybug", "neo4j", "both"), default="both")
    parser.add_argument("--embedder", default=None, help="the vector model's embedder (default: the node's)")
    parser.add_argument("--quiet-s", type=float, default=1.5, help="quiet this long = derivation is done")
    parser.add_argument("--timeout-s", type=float, default=600, help="give up waiting for quiet after this")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


class Workers:
    """The producers and projectors of a node, running in this process until `stop`."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.live = LiveReadModels()
        self.producers = enabled_producers(log.settings)
        self.runners: list[ProjectorRunner] = []
        if self.producers:
            self.runners.append(producer_runner(log, self.producers, None))
        for name in PROJECTORS:
            runner = projector_runner(log, name, None)
            self.live.add(runner)
            self.runners.append(runner)
        self.stop = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> Workers:
        """Start the runners one at a time: on Neo4j, the graph, keyword and vector models opening together
        (each creating its schema) were seen to deadlock, and then to wait on each other for good."""
        for runner in self.runners:
            task = asyncio.create_task(runner.run(self.stop))
            self.tasks.append(task)
            ready = asyncio.create_task(runner.ready.wait())
            await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                ready.cancel()
                await task  # it failed to start: raise why
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    async def quiet(self, quiet_s: float, timeout_s: float) -> float:
        """Wait until no consumer has anything pending and the stream has not grown for `quiet_s`."""
        js = self.log.client.jetstream()
        started = time.perf_counter()
        last, since = -1, time.perf_counter()
        while True:
            if time.perf_counter() - started > timeout_s:
                raise TimeoutError(f"derivation not quiet after {timeout_s:.0f} s")
            stream = await js.stream_info(self.log.layout.name)
            busy = False
            for runner in self.runners:
                info = await js.consumer_info(self.log.layout.name, runner.consumer)
                busy = busy or bool(info.num_pending or info.num_ack_pending)
            if busy or stream.state.last_seq != last:
                last, since = stream.state.last_seq, time.perf_counter()
            elif time.perf_counter() - since >= quiet_s:
                return time.perf_counter() - started - quiet_s
            await asyncio.sleep(0.2)


async def append_fixture(log: EventLog, fixture: Fixture) -> dict[str, Events]:
    """Each session's script in order (a step may cite an earlier step), sessions concurrently."""
    with progress_bar() as progress:
        total = sum(len(script.steps) for script in fixture.scripts)
        task = progress.add_task("append fixture", total=total, rate="")
        limit = asyncio.Semaphore(16)

        async def one(script: Script) -> Events:
            events: Events = {}
            async with limit:
                for step in script.steps:
                    payload = step.payload(events) if callable(step.payload) else step.payload
                    events[step.key] = await log.append(script.session, step.type, step.actor, payload)
                    progress.advance(task)
            return events

        appended = await asyncio.gather(*(one(script) for script in fixture.scripts))
    return {script.session: events for script, events in zip(fixture.scripts, appended, strict=True)}


async def second_phase(
    log: EventLog, memory: LocalMemory, fixture: Fixture, events: dict[str, Events], index: LogIndex
) -> dict[str, int]:
    """What happens after the producers proposed: stale causal edges contradicted (the `retraction`
    producer then retracts them), stale outcomes invalidated, and candidates reviewed in turn through
    `gateway.consolidation.review` (what the CLI and MCP tools call): left pending, rejected, deferred,
    accepted (which promotes)."""
    done = {"contradicted": 0, "invalidated": 0, "pending": 0, "rejected": 0, "deferred": 0, "accepted": 0}
    for link in fixture.truth.causal:
        if link.stale is None:
            continue
        explained = events[link.session][link.explained_key]
        if link.stale == "retracted":
            for edge in index.causal_edges_from(explained):
                payload = {"edge_id": edge.payload["edge_id"], "reason": "the effect came from a bad image"}
                await log.append(link.session, "inference.edge.contradicted", REVIEWER, payload)
                done["contradicted"] += 1
        else:
            gone = {
                "entity": {"name": link.effect_name, "entity_type": "outcome"},
                "invalid_at": utc_timestamp(),
                "reason": "measured again: it did not hold",
            }
            await log.append(link.session, "memory.invalidated", REVIEWER, gone)
            done["invalidated"] += 1
    verdicts = ("pending", "rejected", "deferred", "accepted")
    for number, candidate in enumerate(index.candidates()):
        verdict = verdicts[number % len(verdicts)]
        done[verdict] += 1
        if verdict != "pending":
            await review(
                log,
                memory,
                str(candidate.payload["candidate_id"]),
                decision=verdict,
                rationale=f"bench: {verdict} in turn",
                reviewer=REVIEWER,
                actor=REVIEWER,
                principal=None,
                session=candidate.session,
            )
    return done


async def run_backend(name: str, args: argparse.Namespace, fixture: Fixture) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"eventloom-bench-derived-{name}-") as tmp:
        root = Path(tmp)
        nats = EmbeddedNats(root / "nats")
        url = await nats.start()
        try:
            async with backend_settings(name, root, url) as base:
                settings = replace(base, producers=",".join(builtin_producers()))
                if args.embedder:
                    settings = replace(settings, embedder=args.embedder)
                return await measure_backend(name, settings, args, fixture)
        finally:
            await nats.stop()


async def measure_backend(
    name: str, settings: Settings, args: argparse.Namespace, fixture: Fixture
) -> dict[str, Any]:
    seconds: dict[str, float] = {}
    async with await EventLog.open(settings) as log, Workers(log) as workers:
        console.print(f"[bold]{name}[/]: producers {', '.join(workers.producers)}")
        started = time.perf_counter()
        events = await append_fixture(log, fixture)
        seconds["append"] = time.perf_counter() - started
        seconds["derive_and_project"] = await workers.quiet(args.quiet_s, args.timeout_s)
        index = await LogIndex.read(log)
        before = await stale_rejected(workers.live.memory(), fixture, events)
        started = time.perf_counter()
        reviewed = await second_phase(log, workers.live.memory(), fixture, events, index)
        await workers.quiet(args.quiet_s, args.timeout_s)
        seconds["second_phase"] = time.perf_counter() - started - args.quiet_s
        index = await LogIndex.read(log)
        started = time.perf_counter()
        memory = workers.live.memory()
        console.print(f"measuring: causal reads, citations, same_as, {len(index.candidates())} checkouts")
        recall = await causal_recall(memory, fixture, events)
        stale = await stale_rejected(memory, fixture, events)
        fidelity = citation_fidelity(index, fixture, events)
        resolution = entity_resolution(index, fixture)
        checkouts = await candidate_checkouts(memory, index)
        seconds["measure"] = time.perf_counter() - started
        letters = await list_dead_letters(log.client)
    result: dict[str, Any] = {
        "causal_recall_successors": recall["successors"],
        "causal_recall_predecessors": recall["predecessors"],
        "causal_recall_explain": recall["explain"],
        "causal_path_found": recall["path"],
        "stale_causal_rejected": stale,
        "stale_causal_current_before": None if before is None else round(1 - before, 4),
        "citation_fidelity": fidelity["fraction"],
        "entity_resolution_precision": resolution["precision"],
        "entity_resolution_recall": resolution["recall"],
        "pending_candidates_as_facts": checkouts["pending_candidates_as_facts"],
        "events": index.count,
        "derived_events": index.derived_count,
        "candidates": len(index.candidates()),
        "candidates_by_type": index.candidates_by_type(),
        "causal_edges": len(index.of_type("causal.edge.generated")),
        "same_as_proposed": resolution["proposed"],
        "reviews": reviewed,
        "causal": recall,
        "citation_fidelity_by_kind": fidelity["by_kind"],
        "citation_failures": fidelity["failures"][:10],
        "entity_resolution": resolution,
        "checkouts": checkouts,
        "dead_letters": len(letters),
        "dead_letter_reasons": sorted({letter.error[:160] for letter in letters})[:5],
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
    }
    return with_reasons(result)


def worst(backends: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The top-level keys: each metric's minimum over the backends (the count of pending candidates as
    facts: the maximum), null with the reason when no backend could measure it."""
    top: dict[str, Any] = {}
    for key in METRICS:
        values = [b[key] for b in backends.values() if b.get(key) is not None]
        top[key] = min(values) if values else None
        if not values:
            top[f"{key}_reason"] = next(
                (b[f"{key}_reason"] for b in backends.values() if f"{key}_reason" in b), "no backend measured"
            )
    counts = [
        b["pending_candidates_as_facts"]
        for b in backends.values()
        if b.get("pending_candidates_as_facts") is not None
    ]
    top["pending_candidates_as_facts"] = max(counts) if counts else None
    for key in ("candidates", "causal_edges", "same_as_proposed"):
        top[key] = min((b[key] for b in backends.values() if key in b), default=None)
    return top


REASONS = {
    "causal_recall_successors": "the fixture has no causal chain (more --sessions)",
    "causal_recall_predecessors": "the fixture has no causal chain (more --sessions)",
    "causal_recall_explain": "the fixture has no causal chain (more --sessions)",
    "causal_path_found": "the fixture has no causal chain (more --sessions)",
    "stale_causal_rejected": "the fixture has no stale distractor",
    "citation_fidelity": "no candidate or derived edge in the log: did the producers run?",
    "entity_resolution_precision": "no same_as proposed",
    "entity_resolution_recall": "the fixture has no two spellings of one entity in a session",
}


def with_reasons(result: dict[str, Any]) -> dict[str, Any]:
    """A metric that could not be measured is null, with `<key>_reason` saying why."""
    if not result["candidates"]:
        result = result | {
            "pending_candidates_as_facts": None,
            "pending_candidates_as_facts_reason": "no candidate proposed: nothing could reach the facts",
        }
    return result | {f"{key}_reason": REASONS[key] for key in METRICS if result.get(key) is None}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    names = ["ladybug", "neo4j"] if args.backend == "both" else [args.backend]
    fixture = generate(args.sessions, args.seed)
    backends: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            backends[name] = await run_backend(name, args, fixture)
        except Neo4jUnavailable as exc:
            console.print(f"[yellow]{name}: not measured: {exc}[/]")
            backends[name] = {"unavailable": str(exc)}
    return {
        "benchmark": "derived",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/derived.py " + " ".join(sys.argv[1:]),
        "sessions": len(fixture.scripts),
        "seed": args.seed,
        **worst(backends),
        "not_measured": {name: b["unavailable"] for name, b in backends.items() if "unavailable" in b},
        "seconds": round(time.perf_counter() - started, 1),
        "backends": backends,
        "machine": machine(server_binary_version()),
    }


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
