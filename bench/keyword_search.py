"""The embedded keyword store alone on `query.py`'s synthetic memory: search latency; prints one JSON object.

No NATS, no other lane: the first `--events` events of `bench/corpus.py` (as `query.py` appends them) become
memory documents (`projectors.memory_docs`) in a `SqliteKeywordStore`, then `query.py`'s questions are asked
as its keyword lane asks them (`limit` 50, with the question's session or none) and as its verbatim lane
does (kinds `source` and `code`), one at a time, after `--warmup` unmeasured ones: p50/p95/max per lane.
Only public read-model APIs are used, so the same script measures another checkout of the code:
`PYTHONPATH=<checkout> python bench/keyword_search.py`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import machine, percentiles, progress_bar
from corpus import Corpus

from eventloom.event import Event
from projectors.memory_docs import memory_docs
from readmodels.documents import DocKind, EventDocs
from readmodels.embedded.keyword_store import SqliteKeywordStore

BATCH = 2000
LIMIT = 50  # the retriever's pool for a question of limit 10
VERBATIM_KINDS: tuple[DocKind, ...] = ("source", "code")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events indexed (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="questions per measurement (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured questions first (default 20)")
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked (default 3)")
    parser.add_argument("--sessions", type=int, default=20, help="sessions in the log (default 20)")
    return parser.parse_args(argv)


def event_docs(corpus: Corpus, numbers: range, seqs: dict[str, int]) -> list[EventDocs]:
    """Events `numbers` of the corpus (asked in order: they draw from its generator), as documents."""
    docs: list[EventDocs] = []
    for n in numbers:
        request = corpus.event(n)
        seq = seqs[request.session] = seqs.get(request.session, 0) + 1
        event = Event(
            v=1, session=request.session, seq=seq, ts=f"2026-01-01T00:00:{n:09d}Z", type=request.type,
            actor=request.actor, payload=request.payload, caused_by=[], prev_hash=None, hash=f"{n:064x}",
            sig="", key_id="",
        )  # fmt: skip
        docs.append(memory_docs(event))
    return docs


async def main(args: argparse.Namespace) -> dict[str, Any]:
    started, load = datetime.now(UTC), os.getloadavg()[0]
    corpus = Corpus(sessions=args.sessions)
    with tempfile.TemporaryDirectory(prefix="eventloom-bench-keyword-") as tmp:
        async with SqliteKeywordStore(Path(tmp) / "keyword.sqlite") as store:
            build = time.perf_counter()
            seqs: dict[str, int] = {}
            with progress_bar() as progress:
                task = progress.add_task(f"index {args.events:,} events", total=args.events, rate="")
                for first in range(0, args.events, BATCH):
                    batch = event_docs(corpus, range(first, min(args.events, first + BATCH)), seqs)
                    await store.apply("keyword", batch)
                    progress.advance(task, len(batch))
            build_s = time.perf_counter() - build
            questions = corpus.questions(args.warmup + args.queries)  # as query.py draws them, after the log
            for text, session in questions[: args.warmup]:
                await store.search(text, session=session, limit=LIMIT)
                await store.search(text, session=session, kinds=VERBATIM_KINDS, limit=LIMIT)
            samples: dict[str, list[float]] = {"keyword": [], "verbatim": []}
            hits: list[int] = []
            for _ in range(args.rounds):
                for text, session in questions[args.warmup :]:
                    lanes: tuple[tuple[str, tuple[DocKind, ...] | None], ...] = (
                        ("keyword", None),
                        ("verbatim", VERBATIM_KINDS),
                    )
                    for lane, kinds in lanes:
                        asked = time.perf_counter()
                        found = await store.search(text, session=session, kinds=kinds, limit=LIMIT)
                        samples[lane].append((time.perf_counter() - asked) * 1000)
                        hits.append(len(found))
        with contextlib.closing(sqlite3.connect(store.path)) as db:
            documents = int(db.execute("SELECT count(*) FROM docs").fetchone()[0])
    return {
        "benchmark": "keyword_search",
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/keyword_search.py " + " ".join(sys.argv[1:]),
        "machine": {
            **{key: value for key, value in machine("").items() if not key.startswith("nats")},
            "loadavg_1m_at_start": round(load, 2),
        },
        "events": args.events,
        "documents": documents,
        "build_s": round(build_s, 1),
        "queries": args.queries,
        "rounds": args.rounds,
        "search_ms": {lane: percentiles(ms) for lane, ms in samples.items()},
        "search_mean_ms": {lane: round(statistics.fmean(ms), 2) for lane, ms in samples.items()},
        "hits_per_search": round(statistics.fmean(hits), 1),
    }


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
