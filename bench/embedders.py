"""Embedder speed on this machine: sentences/s at batch 64, long texts/s, load time; prints one JSON object.

Texts are the questions and turns of a LoCoMo- or LongMemEval-format file (default: the LoCoMo fixture in
`tests/fixtures/retrieval/`), so what is timed is what memory embeds. For each embedder installed here
(`eventloom.embedders` entry points; `--embedders` to choose):

- `load_s`: the first `embed` of the process (the model is read then);
- `sentences_per_s`: questions embedded in batches of 64 (after one warm-up batch), for at least 3 s;
- `turns_per_s`: the dataset's turns, whole, in batches of 64;
- `sentences_per_cpu_s`, `turns_per_cpu_s`: the same texts per second of this process's CPU time (all its
  threads): on a machine shared with other work the wall-clock rates fall with the load, these much less
  (an embedder on 2 threads that had both cores to itself would reach up to twice them);
- `query_ms`: one question alone (what a query pays), p50 and p95;
- `rss_growth_mb`: how much this process's resident memory grew over `--distinct` distinct texts of
  `bench/corpus.py` embedded in batches of 1,000, as the vector projector does (what an embedder keeps, its
  tokenizer's caches say; after a collection and `malloc_trim`).

Retrieval quality per embedder is `lane:vector` in `bench/retrieval.py --embedder NAME`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, percentiles, server_binary_version
from corpus import Corpus
from datasets import load_dataset

from eventloom.malloc import live_resident_mb
from readmodels.vector.embedders import EmbedderError, available_embedders, load_embedder, tag

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "retrieval" / "locomo_mini.json"
BATCH = 64
DISTINCT_BATCH = 1000
MIN_SECONDS = 3.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=FIXTURE, help="where the texts come from")
    parser.add_argument("--embedders", default=None, help="comma-separated (default: every installed one)")
    parser.add_argument("--turns", type=int, default=1000, help="turns to embed for turns_per_s")
    parser.add_argument("--distinct", type=int, default=20_000, help="distinct texts for rss_growth_mb")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def rate(embed: Any, texts: Sequence[str], min_seconds: float) -> tuple[float, float]:
    """Texts per second (wall clock, CPU time) over whole passes in batches of `BATCH`, >= `min_seconds`."""
    embed(list(texts[:BATCH]))  # warm-up
    done, started, cpu_started = 0, time.perf_counter(), time.process_time()
    while True:
        for start in range(0, len(texts), BATCH):
            embed(list(texts[start : start + BATCH]))
            done += len(texts[start : start + BATCH])
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            cpu = max(time.process_time() - cpu_started, 1e-9)
            return round(done / elapsed, 1), round(done / cpu, 1)


def rss_growth_mb(embed: Any, count: int) -> float:
    """Resident memory gained over `count` distinct texts, embedded 1,000 at a time."""
    corpus = Corpus(seed=11)
    before = live_resident_mb()
    for start in range(0, count, DISTINCT_BATCH):
        embed([corpus.sentence(20, 60) for _ in range(min(DISTINCT_BATCH, count - start))])
    return round(live_resident_mb() - before, 1)


def measure(name: str, questions: Sequence[str], turns: Sequence[str], distinct: int) -> dict[str, Any]:
    try:
        embedder = load_embedder(name)
        started = time.perf_counter()
        embedder.embed(questions[:1])
    except EmbedderError as error:
        return {"available": False, "error": str(error)}
    load_s = round(time.perf_counter() - started, 3)
    single = []
    for question in questions[:200]:
        began = time.perf_counter()
        embedder.embed([question])
        single.append((time.perf_counter() - began) * 1000)
    sentences, sentences_cpu = rate(embedder.embed, questions, MIN_SECONDS)
    whole_turns, turns_cpu = rate(embedder.embed, turns, 0.0)
    return {
        "available": True,
        "tag": tag(embedder),
        "load_s": load_s,
        "sentences_per_s": sentences,
        "sentences_per_cpu_s": sentences_cpu,
        "turns_per_s": whole_turns,
        "turns_per_cpu_s": turns_cpu,
        "query_ms": percentiles(single),
        "rss_growth_mb": rss_growth_mb(embedder.embed, distinct),
    }


def main(args: argparse.Namespace) -> dict[str, Any]:
    dataset = load_dataset(args.dataset)
    questions = [q.text for q in dataset.questions]
    while len(questions) < 2 * BATCH:
        questions += questions
    turns = [t.text for c in dataset.conversations for t in c.turns][: args.turns]
    names = args.embedders.split(",") if args.embedders else available_embedders()
    results: dict[str, Any] = {}
    for name in names:
        console.print(f"embedding with {name} ...")
        results[name] = measure(name.strip(), questions, turns, args.distinct)
    return {
        "benchmark": "embedders",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/embedders.py " + " ".join(sys.argv[1:]),
        "machine": machine(server_binary_version()),
        "load_average": list(os.getloadavg()),
        "dataset": str(args.dataset),
        "batch": BATCH,
        "questions": len(set(questions)),
        "turns": len(turns),
        "distinct": args.distinct,
        "embedders": results,
    }


if __name__ == "__main__":
    print(msgspec.json.encode(main(parse_args())).decode())
