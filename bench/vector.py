"""The embedded vector index: query latency and recall@10 against exact search; prints one JSON object.

`--count` unit vectors of `--dimensions` (default 100,000 x 384) go into a `VectorIndex` in batches of
5,000, as commits arrive. Text embeddings cluster by topic, so the vectors do too: `--topics` random unit
centres (1,000), each vector a centre plus Gaussian noise scaled to a cosine of ~0.75 with it, queries
drawn the same way (`--topics 0`: plain Gaussian vectors, where nothing is near anything and no
approximate index does well).
Then `--queries` random queries ask for the 10 best rows: latency p50/p95 of `search` (HNSW candidates
re-ranked exactly), recall@10 against a full float32 scan (timed too), and the same under a filter that
keeps one row in eight (a session of eight, say). Goals (issue 5): p95 < 10 ms, recall@10 >= 0.95.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np
from common import console, machine, progress_bar, server_binary_version

from readmodels.vector.embedders import Vectors
from readmodels.vector.index import VectorIndex, best

BATCH = 5000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000, help="vectors in the index (100000)")
    parser.add_argument("--dimensions", type=int, default=384, help="vector width (384)")
    parser.add_argument("--queries", type=int, default=200, help="queries timed (200)")
    parser.add_argument("--topics", type=int, default=1000, help="cluster centres (1000; 0: no clusters)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def unit_rows(rng: np.random.Generator, count: int, dimensions: int) -> Vectors:
    vectors: Vectors = rng.standard_normal((count, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def clustered_rows(rng: np.random.Generator, centres: Vectors | None, count: int, dimensions: int) -> Vectors:
    if centres is None or not len(centres):
        return unit_rows(rng, count, dimensions)
    spread = np.sqrt(0.78 / dimensions)  # |noise|^2 ~ 0.78: cosine to the centre ~ 1 / sqrt(1.78) ~ 0.75
    noise = rng.standard_normal((count, dimensions)).astype(np.float32) * np.float32(spread)
    vectors: Vectors = centres[rng.integers(0, len(centres), count)] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def measure(index: VectorIndex, data: Vectors, queries: Vectors, allowed: Any) -> dict[str, Any]:
    """Latency of `search` (the exact rows of its candidates are the caller's: here `data`), and recall
    against a float32 scan of every allowed row."""
    latencies, exact_latencies, found = [], [], 0
    everything = np.arange(len(data)) if allowed is None else np.flatnonzero(allowed)
    for query in queries:
        started = time.perf_counter()
        approximate = index.search(query, 10, lambda rows: data[rows], allowed)
        latencies.append(time.perf_counter() - started)
        started = time.perf_counter()
        exact = best(query, everything, data[everything], 10)
        exact_latencies.append(time.perf_counter() - started)
        found += len({row for row, _ in approximate} & {row for row, _ in exact})
    cuts = statistics.quantiles(latencies, n=20)
    return {
        "p50_ms": round(statistics.median(latencies) * 1000, 3),
        "p95_ms": round(cuts[18] * 1000, 3),
        "exact_scan_p50_ms": round(statistics.median(exact_latencies) * 1000, 3),
        "recall_at_10": round(found / (10 * len(queries)), 4),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(7)
    index = VectorIndex(args.dimensions)
    centres = unit_rows(rng, args.topics, args.dimensions) if args.topics else None
    data = np.zeros((args.count, args.dimensions), dtype=np.float32)
    started = time.perf_counter()
    with progress_bar() as progress:
        task = progress.add_task("index", total=args.count, rate="")
        for start in range(0, args.count, BATCH):
            batch = clustered_rows(rng, centres, min(BATCH, args.count - start), args.dimensions)
            data[start : start + len(batch)] = batch
            index.add(batch)
            progress.advance(task, len(batch))
    build_s = time.perf_counter() - started
    queries = clustered_rows(rng, centres, args.queries, args.dimensions)
    console.print("querying: unfiltered, then one row in eight")
    unfiltered = measure(index, data, queries, None)
    filtered = measure(index, data, queries, np.arange(args.count) % 8 == 3)
    result = {
        "benchmark": "vector",
        "vectors": args.count,
        "dimensions": args.dimensions,
        "queries": args.queries,
        "topics": args.topics,
        "build_seconds": round(build_s, 2),
        "unfiltered": unfiltered,
        "filtered_one_in_eight": filtered,
        "goals": {
            "p95_lt_10ms": max(unfiltered["p95_ms"], filtered["p95_ms"]) < 10,
            "recall_at_10_ge_0_95": min(unfiltered["recall_at_10"], filtered["recall_at_10"]) >= 0.95,
        },
        "machine": machine(server_binary_version()),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
