"""Query and checkout latency through the query service, at growing log sizes; prints one JSON object.

For each graph backend (LadybugDB embedded, Neo4j), against an embedded nats-server:
  1. append a synthetic agent memory (bench/corpus.py) up to each size (default 10,000 and 100,000 events);
  2. rebuild every read model the query service uses (graph, keyword, vector, inferred) from the stream;
  3. serve them with the query service (`readmodels.query.service`) and ask through `MemoryClient` over NATS,
     as a gateway would: p50/p95/max of `query` and `checkout`, per-lane medians, and two baselines from the
     same run: a raw NATS request/reply echo (the transport's floor) and a BM25-only query (one lane).
Neo4j comes from `NEO4J_URI`, else is provisioned as the tests do; `--backends ladybug` skips it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, peak_rss_mb, percentiles, progress_bar, server_binary_version
from corpus import Corpus
from nats.errors import NoRespondersError
from query_models import BuiltModels, build_models

from eventloom.bus.connection import connect
from eventloom.bus.embedded import EmbeddedNats
from eventloom.log import EventLog
from eventloom.settings import Settings
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.neo4j.local import Neo4jEndpoint, provision_neo4j
from readmodels.query.client import MemoryClient
from readmodels.query.service import serve_memory
from readmodels.retrieval.model import Query, QueryResult

APPEND_CHUNK = 500


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="log sizes, ascending (default 10000,100000)")
    parser.add_argument("--backends", default="ladybug,neo4j", help="graph backends (default ladybug,neo4j)")
    parser.add_argument("--queries", type=int, default=200, help="questions per measurement (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured questions first (default 20)")
    parser.add_argument("--sessions", type=int, default=20, help="sessions in the log (default 20)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def timed(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[list[float], list[Any]]:
    samples: list[float] = []
    results: list[Any] = []
    for call in calls:
        started = time.perf_counter()
        results.append(await call())
        samples.append((time.perf_counter() - started) * 1000)
    return samples, results


async def append_up_to(log: EventLog, corpus: Corpus, start: int, size: int) -> None:
    with progress_bar() as progress:
        task = progress.add_task(f"append to {size:,}", total=size - start, rate="")
        for first in range(start, size, APPEND_CHUNK):
            await log.append_many([corpus.event(n) for n in range(first, min(size, first + APPEND_CHUNK))])
            progress.advance(task, min(APPEND_CHUNK, size - first))


async def until_answered(client: Any, subject: str, payload: bytes, within_s: float = 10.0) -> None:
    """Ask until a responder answers: on a loaded machine the server has been seen to answer "no
    responders" for a moment after the responder's subscription was flushed (CI, 2026-11-24)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            await client.request(subject, payload, timeout=within_s)
            return
        except NoRespondersError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def echo_baseline(url: str, count: int) -> dict[str, float]:
    """Raw request/reply on the same server: what any answer over NATS costs, with no work done."""
    server, asker = await connect(url, name="bench-echo"), await connect(url, name="bench-ask")
    try:

        async def echo(message: Any) -> None:
            await message.respond(message.data * 20)  # a reply about the size of a result

        await server.subscribe("bench.echo", queue="echo", cb=echo)
        await server.flush()
        payload = b'{"text": "what do we know about the nightly backup?"}'
        await until_answered(asker, "bench.echo", payload)
        samples, _ = await timed(
            [lambda: asker.request("bench.echo", payload, timeout=10) for _ in range(count)]
        )
        return percentiles(samples)
    finally:
        await asker.close()
        await server.close()


async def measure(models: BuiltModels, url: str, corpus: Corpus, args: argparse.Namespace) -> dict[str, Any]:
    stop, ready = asyncio.Event(), asyncio.Event()
    service = asyncio.create_task(serve_memory(models.client, models.memory, stop, ready))
    await ready.wait()
    client = await connect(url, name="bench-gateway")
    try:
        memory = MemoryClient(client)
        questions = corpus.questions(args.warmup + args.queries)
        asked = questions[args.warmup :]
        await timed([asking(memory, Query(text=t, session=s)) for t, s in questions[: args.warmup]])
        query_ms, results = await timed([asking(memory, Query(text=t, session=s)) for t, s in asked])
        bm25_ms, _ = await timed(
            [asking(memory, Query(text=t, session=s, lanes=["keyword"])) for t, s in asked]
        )
        checkout_ms, checkouts = await timed(
            [checking_out(memory, CheckoutRequest(text=t, session=s)) for t, s in asked]
        )
        return {
            "query_ms": percentiles(query_ms),
            "checkout_ms": percentiles(checkout_ms),
            "bm25_only_query_ms": percentiles(bm25_ms),
            "lane_median_ms": lane_medians(results),
            "hits_per_query": round(statistics.fmean(len(r.hits) for r in results), 1),
            "checkout_tokens_median": statistics.median(c.diagnostics.tokens for c in checkouts),
            "warnings": sorted({w for r in results for w in r.warnings})[:5],
        }
    finally:
        stop.set()
        await service
        await client.close()


def asking(memory: MemoryClient, query: Query) -> Callable[[], Awaitable[QueryResult]]:
    return lambda: memory.query(query)


def checking_out(memory: MemoryClient, request: CheckoutRequest) -> Callable[[], Awaitable[MemoryCheckout]]:
    return lambda: memory.checkout(request)


def lane_medians(results: list[QueryResult]) -> dict[str, float]:
    by_lane: dict[str, list[float]] = {}
    for result in results:
        for report in result.lanes:
            by_lane.setdefault(report.lane, []).append(report.ms)
    return {lane: round(statistics.median(ms), 2) for lane, ms in by_lane.items()}


@contextlib.asynccontextmanager
async def backend_settings(name: str, root: Path, url: str) -> AsyncIterator[Settings]:
    base = Settings(data_dir=root / "data", nats_url=url, producers="none")
    if name == "ladybug":
        yield base
        return
    with provision_neo4j() as endpoint:
        yield neo4j_settings(base, endpoint)


def neo4j_settings(base: Settings, endpoint: Neo4jEndpoint) -> Settings:
    return replace(
        base,
        graph_backend="neo4j",
        neo4j_uri=endpoint.uri,
        neo4j_user=endpoint.user,
        neo4j_password=endpoint.password,
    )


async def run_backend(name: str, sizes: list[int], args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"eventloom-bench-query-{name}-") as tmp:
        root = Path(tmp)
        nats = EmbeddedNats(root / "nats")
        url = await nats.start()
        try:
            async with backend_settings(name, root, url) as settings:
                corpus = Corpus(sessions=args.sessions)
                report: dict[str, Any] = {}
                async with await EventLog.open(settings) as log:
                    appended = 0
                    for size in sizes:
                        await append_up_to(log, corpus, appended, size)
                        appended = size
                        async with build_models(log) as models:
                            console.print(
                                f"[bold]{name} @ {size:,}[/]: models built in {models.build_s:.1f}s"
                            )
                            result = await measure(models, url, corpus, args)
                        processes = {"nats_server": nats.pid}
                        result["peak_rss_mb"] = peak_rss_mb(processes, own="bench_query_service")
                        report[str(size)] = {"build_s": round(models.build_s, 1), **result}
                return report
        finally:
            await nats.stop()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    sizes = sorted(int(size) for size in args.sizes.split(","))
    started = datetime.now(UTC)
    report: dict[str, Any] = {
        "benchmark": "query",
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/query.py " + " ".join(sys.argv[1:]),
        "machine": machine(server_binary_version()),
        "queries": args.queries,
        "sessions": args.sessions,
    }
    with tempfile.TemporaryDirectory() as tmp:
        nats = EmbeddedNats(Path(tmp) / "nats")
        url = await nats.start()
        try:
            report["raw_nats_request_reply_ms"] = await echo_baseline(url, args.queries)
        finally:
            await nats.stop()
    for backend in [name.strip() for name in args.backends.split(",") if name.strip()]:
        report[backend] = await run_backend(backend, sizes, args)
    return report


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
