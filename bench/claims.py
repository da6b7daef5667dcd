"""The claims pack (issue 22): projection rate and read latency on LadybugDB and Neo4j.

The load (bench/claims_fixture.py): `--events` signed, hash-chained events of observations with mentions and
triples, claims resting on them (basis chains 1-3 deep), about 10 % conflicting claims with the
contradiction producer's `inference.edge.generated` edges, Resolutions and acceptances. In this process:
  1. `translate`: the pure translation of every event into its operations (the ceiling for what follows);
  2. `producer`: the contradiction producer's pure incompatibility rule over every pair it compares
     (`incompatible`), and its per-claim path without the state store (`held_claim` + the comparisons);
  3. for each backend, `projection`: the claims projector applies the events in batches of `--batch`, as
     its runner does (translation, then one transaction per batch with the checkpoints), into a fresh store;
  4. reads, `--samples` of each, store call to decoded answer: `about` a person (limit 100), `basis` of a
     claim whose chain is 3 deep, `contradictions` about a person with one left open (and any, limit 100),
     and `view` (limit 200): the newest nodes as the web view opens, around a person, and a search.
Neo4j comes from `NEO4J_URI` (its claims model is cleared first), else is provisioned as the tests do; a
backend that cannot be had is named in `not_measured`. Top-level keys are the worst over the backends
measured; each one's own under `backends`.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from claims_fixture import Load, claims_load
from common import machine, percentiles, progress_bar, server_binary_version

from eventloom.event import Event
from gateway.packs.claims.events import CLAIM_TYPES
from gateway.packs.claims.ladybug_store import LadybugClaimsStore
from gateway.packs.claims.neo4j_store import Neo4jClaimsStore
from gateway.packs.claims.producer import HeldClaim, held_claim, incompatible
from gateway.packs.claims.projector import ClaimsStore
from gateway.packs.claims.reads import AboutQuestion, ClaimQuestion, ContradictionsQuestion
from gateway.packs.claims.translate import changes
from projectors.tracking import TrackingProjector
from readmodels.neo4j.local import Neo4jUnavailable, provision_neo4j
from readmodels.view import ViewRequest

PROJECTOR = "claims"
VIEW_LIMIT = 200
MIN_TIMED_SECONDS = 0.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500, help="events per projection batch")
    parser.add_argument("--samples", type=int, default=200, help="reads of each kind")
    parser.add_argument("--backend", choices=("ladybug", "neo4j", "both"), default="both")
    return parser.parse_args(argv)


async def timed(samples: Sequence[Any], ask: Callable[[Any], Awaitable[Any]]) -> dict[str, float]:
    latencies = []
    for sample in samples:
        started = time.perf_counter()
        answer = await ask(sample)
        latencies.append((time.perf_counter() - started) * 1000)
        if not answer:
            raise RuntimeError(f"empty answer for {sample!r}: the projection is incomplete")
    return percentiles(latencies)


def non_empty_view(ask: Callable[[ViewRequest], Awaitable[Any]]) -> Callable[[ViewRequest], Awaitable[Any]]:
    async def nodes(request: ViewRequest) -> Any:
        return (await ask(request)).nodes

    return nodes


async def measure_reads(store: ClaimsStore, load: Load, samples: int) -> dict[str, Any]:
    rng = random.Random(11)
    people = [rng.choice(load.people) for _ in range(samples)]
    deep = [rng.choice(load.deepest_claims) for _ in range(samples)]
    open_ones = [rng.choice(load.contradicted_people) for _ in range(samples)]
    view = non_empty_view(store.view)
    return {
        "about_ms": await timed(people, lambda p: store.about(AboutQuestion(entity=p))),
        "basis_ms": await timed(deep, lambda k: store.basis(ClaimQuestion(claim=k))),
        "contradictions_ms": await timed(
            open_ones, lambda p: store.contradictions(ContradictionsQuestion(entity=p))
        ),
        "contradictions_any_ms": await timed(
            range(max(1, samples // 4)), lambda _: store.contradictions(ContradictionsQuestion())
        ),
        "view_ms": await timed(range(samples), lambda _: view(ViewRequest(limit=VIEW_LIMIT))),
        "view_focus_ms": await timed(people, lambda p: view(ViewRequest(focus=p, limit=VIEW_LIMIT))),
        "view_search_ms": await timed(people, lambda p: view(ViewRequest(search=p, limit=VIEW_LIMIT))),
        "basis_links_seen": sorted({await basis_links(store, key) for key in deep[:20]}),
        "view_nodes": len((await store.view(ViewRequest(limit=VIEW_LIMIT))).nodes),
    }


async def basis_links(store: ClaimsStore, key: str) -> int:
    chain = await store.basis(ClaimQuestion(claim=key))
    return 0 if chain is None else len(chain.links)


async def project(store: ClaimsStore, events: list[Event], batch: int) -> float:
    projector = TrackingProjector(PROJECTOR, store, changes)
    started = time.perf_counter()
    with progress_bar() as bar:
        task = bar.add_task("projecting", total=len(events), rate="")
        for first in range(0, len(events), batch):
            await projector.apply(events[first : first + batch])
            done = min(len(events), first + batch)
            bar.update(task, completed=done, rate=f"{done / (time.perf_counter() - started):,.0f} ev/s")
    return time.perf_counter() - started


async def open_store(name: str, stack: AsyncExitStack) -> ClaimsStore:
    store: LadybugClaimsStore | Neo4jClaimsStore
    if name == "ladybug":
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="eventloom-bench-claims-")))
        store = LadybugClaimsStore(directory / "claims.lbug")
        await store.open()
    else:
        endpoint = stack.enter_context(provision_neo4j())
        store = Neo4jClaimsStore(endpoint.uri, user=endpoint.user, password=endpoint.password)
        await store.open()
        await store.clear()
    stack.push_async_callback(store.close)
    return store


async def run_backend(name: str, load: Load, args: argparse.Namespace) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        store = await open_store(name, stack)
        seconds = await project(store, load.events, args.batch)
        reads = await measure_reads(store, load, args.samples)
        measured: dict[str, Any] = {
            "projection_seconds": round(seconds, 1),
            "projection_events_per_s": round(len(load.events) / seconds, 1),
        }
        for question in ("about", "basis", "contradictions", "view"):
            measured[f"{question}_p50_ms"] = reads[f"{question}_ms"]["p50"]
            measured[f"{question}_p95_ms"] = reads[f"{question}_ms"]["p95"]
        return measured | {"reads": reads}


def translate_rate(events: list[Event]) -> tuple[float, int, int]:
    """Events/s of `translate.changes` alone, the operations it made, and events it gave none for."""
    changes(events[0])  # the first call loads the plug-in event types
    started = time.perf_counter()
    translated = [changes(event) for event in events]
    elapsed = time.perf_counter() - started
    operations = sum(len(item.operations) for item in translated)
    print(f"translated {len(events):,} events into {operations:,} operations", file=sys.stderr)
    return len(events) / elapsed, operations, sum(1 for item in translated if not item.operations)


def repeated_rate(work: Callable[[], int]) -> float:
    """Items/s of `work` (which returns how many it did), run again until `MIN_TIMED_SECONDS` passed."""
    done, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < MIN_TIMED_SECONDS or done == 0:
        done += work()
    return done / elapsed


def producer_rates(load: Load) -> dict[str, Any]:
    """The contradiction producer's pure parts: its rule per pair, and a claim's whole path minus state."""
    pairs = load.incompatibility_checks
    claims = [event for event in load.events if event.type in CLAIM_TYPES]

    def check_all() -> int:
        for new, old, predicate in pairs:
            incompatible(new, old, predicate)
        return len(pairs)

    def process_all() -> int:
        groups: dict[tuple[str, str], list[HeldClaim]] = {}
        edges = 0
        for event in claims:
            found = held_claim(event)
            assert found is not None
            subject, predicate, new = found
            group = groups.setdefault((subject, predicate), [])
            edges += sum(1 for old in group if incompatible(new, old, predicate))
            group.append(new)
        # the load's edges, but for any the cut left behind its last claim
        assert edges >= load.counts["inference.edge.generated"]
        return len(claims)

    return {
        "incompatibility_checks": len(pairs),
        "incompatible_checks_per_s": round(repeated_rate(check_all), 1) if pairs else None,
        "producer_claims_per_s": round(repeated_rate(process_all), 1) if claims else None,
    }


async def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    names = ["ladybug", "neo4j"] if args.backend == "both" else [args.backend]
    load = claims_load(args.events)
    rate, operations, without = translate_rate(load.events)
    report: dict[str, Any] = {
        "benchmark": "claims",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(server_binary_version()),
        "events": len(load.events),
        "event_types": dict(sorted(load.counts.items())),
        "operations": operations,
        "events_without_operations": without,
        "people": len(load.people),
        "translate_events_per_s": round(rate, 1),
        **producer_rates(load),
        "backends": {},
        "not_measured": {},
    }
    for name in names:
        try:
            report["backends"][name] = await run_backend(name, load, args)
        except Neo4jUnavailable as exc:
            report["not_measured"][name] = str(exc)
    measured = list(report["backends"].values())
    if measured:
        report["projection_events_per_s"] = min(b["projection_events_per_s"] for b in measured)
        for key in [
            f"{q}_{p}_ms" for q in ("about", "basis", "contradictions", "view") for p in ("p50", "p95")
        ]:
            report[key] = max(b[key] for b in measured)
    return report


if __name__ == "__main__":
    sys.stdout.write(msgspec.json.encode(asyncio.run(main())).decode() + "\n")
