"""Retrieval quality on conversational memory (LoCoMo or LongMemEval format); prints one JSON object.

Each dataset's conversations are appended as `transcript.turn` events through the normal path (signed,
hash-chained, on JetStream), every read model is rebuilt from the stream, and every question is asked
through the query service (`MemoryClient` over NATS) in its conversation's session. The hits' citations,
in rank order, make the ranked list of turns (each turn once): a hit citing several turns takes several
ranks, so every variant is scored on the same footing. Reported per dataset, next to each other:

- `bm25`: the keyword lane alone (plain BM25 over every memory document): the baseline;
- each fusion profile (`balanced`, `precision`, `recall`, `temporal`) with its own fusion, and `balanced`
  with the other fusion (`rrf` vs `score`), which is how the profiles' fusions were chosen.

Recall@k is the share of a question's evidence turns cited in the top k hits; hit@k whether any is;
MRR uses the first hit citing any evidence (within 10). LongMemEval is also scored by session, as its own
evaluation does. Abstention questions are skipped and counted. No question is special-cased.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, progress_bar, server_binary_version
from dataset_model import Conversation, Dataset
from datasets import append_requests, load_dataset
from query_models import build_models
from retrieval_metrics import QuestionRanking, evaluate, report_dict, to_sessions

from eventloom.bus.connection import connect
from eventloom.bus.embedded import EmbeddedNats
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from readmodels.query.client import MemoryClient
from readmodels.query.service import serve_memory
from readmodels.retrieval.fusion import PROFILES, Fusion, Lane
from readmodels.retrieval.model import Query

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "retrieval"
DEFAULT_DATASETS = (FIXTURES / "locomo_mini.json", FIXTURES / "longmemeval_mini.json")
LIMIT = 10
Variant = tuple[str, str, list[Lane] | None, Fusion | None]
"""(label, profile, lanes, fusion override)"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset",
        action="append",
        type=Path,
        help="a LoCoMo or LongMemEval JSON file (repeatable; default: the two fixtures in tests/)",
    )
    parser.add_argument(
        "--embedder", default=None, help="vector embedder (default: EVENTLOOM_EMBEDDER or hash)"
    )
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def variants() -> list[Variant]:
    found: list[Variant] = [("bm25", "balanced", ["keyword"], None)]
    found += [(name, name, None, None) for name in PROFILES]
    other: Fusion = "score" if PROFILES["balanced"].fusion == "rrf" else "rrf"
    found.append((f"balanced+{other}", "balanced", None, other))
    return found


async def append_dataset(log: EventLog, dataset: Dataset) -> dict[tuple[str, int], str]:
    """Append every conversation; returns (session, seq) -> turn id, to read citations back as turns."""
    turn_of: dict[tuple[str, int], str] = {}
    with progress_bar() as progress:
        task = progress.add_task(f"append {dataset.source}", total=len(dataset.conversations), rate="")
        for conversation in dataset.conversations:
            events: list[Event] = await log.append_many(append_requests(conversation))
            for event in events:
                turn_of[(event.session, event.seq)] = str(event.payload["turn_id"])
            progress.advance(task)
    return turn_of


async def rank(
    memory: MemoryClient, conversation: Conversation, variant: Variant, turn_of: dict[tuple[str, int], str]
) -> list[QuestionRanking]:
    _label, profile, lanes, fusion = variant
    rankings = []
    for question in conversation.questions:
        query = Query(
            text=question.text[:4096],
            session=conversation.session,
            limit=LIMIT,
            profile=profile,
            lanes=lanes,
            fusion=fusion,
        )
        result = await memory.query(query)
        turns = [turn_of.get((c.session, c.seq)) for hit in result.hits for c in hit.citations]
        # one turn per rank, in the order the hits cite them: a hit citing several turns gets no extra slots
        ranked = tuple(frozenset([turn]) for turn in dict.fromkeys(t for t in turns if t is not None))
        rankings.append(
            QuestionRanking(
                question_id=question.question_id,
                evidence=frozenset(question.evidence_turns),
                ranked=ranked,
                category=str(question.category),
                abstention=question.abstention,
            )
        )
    return rankings


def by_session(rankings: list[QuestionRanking], dataset: Dataset) -> list[QuestionRanking]:
    session_of = {turn: s for c in dataset.conversations for turn, s in c.session_of_turn().items()}
    questions = {q.question_id: q for q in dataset.questions}
    return [
        msgspec.structs.replace(
            r,
            evidence=frozenset(questions[r.question_id].evidence_sessions),
            ranked=to_sessions(r.ranked, session_of),
        )
        for r in rankings
    ]


async def score_dataset(
    memory: MemoryClient, dataset: Dataset, turn_of: dict[tuple[str, int], str]
) -> dict[str, Any]:
    scores: dict[str, Any] = {}
    for variant in variants():
        rankings = [r for c in dataset.conversations for r in await rank(memory, c, variant, turn_of)]
        entry = {"turns": report_dict(evaluate(rankings))}
        if dataset.source == "longmemeval":
            entry["sessions"] = report_dict(evaluate(by_session(rankings, dataset)))
        scores[variant[0]] = entry
    return scores


def headline(scores: dict[str, Any]) -> dict[str, Any]:
    def recall5(label: str) -> float:
        return float(scores[label]["turns"]["overall"]["recall"]["@5"])

    return {
        "fused_balanced_recall@5": recall5("balanced"),
        "bm25_recall@5": recall5("bm25"),
        "fused_beats_bm25_on_recall@5": recall5("balanced") > recall5("bm25"),
    }


async def run_dataset(path: Path, embedder: str | None) -> dict[str, Any]:
    dataset = load_dataset(path)
    with tempfile.TemporaryDirectory(prefix="eventloom-bench-retrieval-") as tmp:
        nats = EmbeddedNats(Path(tmp) / "nats")
        url = await nats.start()
        try:
            settings = Settings(data_dir=Path(tmp) / "data", nats_url=url, producers="none")
            if embedder:
                settings = dataclasses.replace(settings, embedder=embedder)
            async with await EventLog.open(settings) as log:
                turn_of = await append_dataset(log, dataset)
                async with build_models(log) as models:
                    stop, ready = asyncio.Event(), asyncio.Event()
                    service = asyncio.create_task(serve_memory(models.client, models.memory, stop, ready))
                    await ready.wait()
                    client = await connect(url, name="bench-retrieval")
                    try:
                        scores = await score_dataset(MemoryClient(client), dataset, turn_of)
                    finally:
                        stop.set()
                        await service
                        await client.close()
        finally:
            await nats.stop()
    console.print(f"[bold]{path.name}[/]: {headline(scores)}")
    return {
        "file": str(path),
        "format": dataset.source,
        "conversations": len(dataset.conversations),
        "questions": len(dataset.questions),
        "load_issues": dataset.report.counts(),
        "embedder": settings.embedder,
        **headline(scores),
        "results": scores,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    paths = args.dataset or list(DEFAULT_DATASETS)
    return {
        "benchmark": "retrieval",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/retrieval.py " + " ".join(sys.argv[1:]),
        "machine": machine(server_binary_version()),
        "limit": LIMIT,
        "datasets": [await run_dataset(path, args.embedder) for path in paths],
    }


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
