"""Resident memory of the embedded vector store per document; prints one JSON object.

Opens a `SqliteVectorStore` (the `hash` embedder at `--dimensions`, so no model table clouds the figure),
applies `--count` documents of `bench/corpus.py`'s words (16 sessions, one document an event, batches of
1,000 as commits arrive), asks `--queries` questions, and reads the process's resident memory
(`/proc/self/status` VmRSS, after `malloc_trim`) before and after: `rss_kb_per_doc` is the difference over
the count. Then re-opens the store (what a restart loads) and measures again.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
from common import console, progress_bar
from corpus import Corpus

from eventloom.malloc import live_resident_mb
from readmodels.documents import EventDocs, MemoryDoc
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.vector.embedders import load_embedder

BATCH = 1000
SESSIONS = 16


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=30_000, help="documents applied (30000)")
    parser.add_argument("--dimensions", type=int, default=256, help="vector width (256, the default's)")
    parser.add_argument("--queries", type=int, default=200, help="questions asked after loading (200)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def batch(corpus: Corpus, begin: int, end: int) -> list[EventDocs]:
    """Made as applied: documents the benchmark itself held would count as the store's."""
    events = []
    for i in range(begin, end):
        session, seq = corpus.sessions[i % SESSIONS], i // SESSIONS + 1
        ts = f"2026-11-26T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
        doc = MemoryDoc(
            session=session, seq=seq, event_hash=f"{i:064x}", event_type="turn.recorded", ts=ts,
            kind="turn", text=corpus.sentence(20, 60),
        )  # fmt: skip
        events.append(EventDocs(session=session, seq=seq, event_hash=doc.event_hash, docs=(doc,)))
    return events


async def measure(args: argparse.Namespace, path: Path) -> dict[str, Any]:
    corpus = Corpus(seed=7, sessions=SESSIONS)
    questions = [corpus.sentence(4, 10) for _ in range(args.queries)]
    embedder = load_embedder("hash", args.dimensions)
    store = SqliteVectorStore(path, embedder)
    await store.open()
    start = live_resident_mb()
    with progress_bar() as bar:
        task = bar.add_task("documents", total=args.count, rate="")
        for begin in range(0, args.count, BATCH):
            events = batch(corpus, begin, min(begin + BATCH, args.count))
            await store.apply("vector", events)
            bar.advance(task, len(events))
        del events
    loaded = live_resident_mb()
    began = time.perf_counter()
    for i, question in enumerate(questions):
        await store.search(question, session=corpus.sessions[i % SESSIONS] if i % 2 else None)
    per_query_ms = (time.perf_counter() - began) * 1000 / max(1, len(questions))
    queried = live_resident_mb()
    await store.close()
    del store
    after_close = live_resident_mb()
    reopened_store = SqliteVectorStore(path, embedder)
    await reopened_store.open()
    reopened = live_resident_mb()
    await reopened_store.close()
    return {
        "count": args.count,
        "dimensions": args.dimensions,
        "rss_mb_start": round(start, 1),
        "rss_mb_loaded": round(loaded, 1),
        "rss_mb_after_queries": round(queried, 1),
        "rss_kb_per_doc": round((queried - start) * 1024 / args.count, 2),
        "rss_kb_per_doc_reopened": round((reopened - after_close) * 1024 / args.count, 2),
        "search_ms_mean": round(per_query_ms, 2),
    }


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        result = asyncio.run(measure(args, Path(scratch) / "vector.db"))
    console.print(result)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")


if __name__ == "__main__":
    main()
