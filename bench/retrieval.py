"""Retrieval quality on conversational memory (LoCoMo or LongMemEval format); prints one JSON object.

Each dataset's conversations are appended as `transcript.turn` events through the normal path (signed,
hash-chained, on JetStream), every read model is rebuilt from the stream, and every question is asked
through the query service (`MemoryClient` over NATS) in its conversation's session. The hits' citations,
in rank order, make the ranked list of turns (each turn once): a hit citing several turns takes several
ranks, so every variant is scored on the same footing. Reported per dataset, under `results`:

- `bm25`: the keyword lane alone (plain BM25 over every memory document): the baseline;
- `lane:<name>`: each lane alone (exact, keyword, vector, traversal, verbatim), to see what each brings;
- each profile, with `default_profile` naming the one the query service uses when none is asked.

Each variant has Recall@1/5/10 (the share of a question's evidence turns cited in the top k), hit@k, MRR
(the first hit citing any evidence, within 10) and nDCG@10, overall and per question category (BEAM's
`beam_kind` where the file has it), the share of the top-5 hits of each kind (entity, event, source) and
the round-trip latency of the questions. LongMemEval is also scored by session, as its own evaluation does.
Abstention questions (LoCoMo's adversarial category, LongMemEval's `_abs`, BEAM's `abstention`) have
nothing to find: they are scored by `abstention`, from the default profile's Memory Checkout of every
question (did it say `answer_from_memory`?). No question is special-cased.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, progress_bar, server_binary_version
from dataset_model import Conversation, Dataset
from datasets import append_requests, load_dataset
from query_models import BuiltModels, build_models
from retrieval_metrics import QuestionRanking, abstention_scores, evaluate, report_dict, to_sessions

from eventloom.bus.connection import connect
from eventloom.bus.embedded import EmbeddedNats
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from readmodels.checkout.model import CheckoutRequest
from readmodels.query.client import MemoryClient
from readmodels.query.service import serve_memory
from readmodels.retrieval.fusion import DEFAULT_PROFILE, LANES, PROFILES, Lane
from readmodels.retrieval.model import MAX_QUERY_CHARS, Query, QueryResult

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "retrieval"
DEFAULT_DATASETS = (FIXTURES / "locomo_mini.json", FIXTURES / "longmemeval_mini.json")
LIMIT = 10


@dataclass(frozen=True)
class Variant:
    label: str
    profile: str
    lanes: list[Lane] | None = None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dataset",
        action="append",
        type=Path,
        help="a LoCoMo or LongMemEval JSON file (repeatable; default: the two fixtures in tests/)",
    )
    parser.add_argument(
        "--embedder", default=None, help="vector embedder (default: EVENTLOOM_EMBEDDER or the default one)"
    )
    parser.add_argument(
        "--profiles", default=",".join(PROFILES), help="profiles to score, comma-separated (default: all)"
    )
    parser.add_argument("--no-lanes", action="store_true", help="skip scoring each lane alone")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def variants(profiles: Sequence[str], lanes_alone: bool = True) -> list[Variant]:
    found = [Variant("bm25", DEFAULT_PROFILE, ["keyword"])]
    if lanes_alone:
        found += [Variant(f"lane:{lane}", DEFAULT_PROFILE, [lane]) for lane in LANES]
    return found + [Variant(name, name) for name in profiles]


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


def ranked_turns(result: QueryResult, turn_of: dict[tuple[str, int], str]) -> tuple[frozenset[str], ...]:
    """One turn per rank, in the order the hits cite them: a hit citing several turns gets several ranks."""
    turns = [turn_of.get((c.session, c.seq)) for hit in result.hits for c in hit.citations]
    return tuple(frozenset([turn]) for turn in dict.fromkeys(t for t in turns if t is not None))


async def rank(
    memory: MemoryClient, conversation: Conversation, variant: Variant, turn_of: dict[tuple[str, int], str]
) -> list[QuestionRanking]:
    rankings = []
    for question in conversation.questions:
        query = Query(
            text=question.text[:MAX_QUERY_CHARS],
            session=conversation.session,
            limit=LIMIT,
            profile=variant.profile,
            lanes=variant.lanes,
        )
        started = time.perf_counter()
        result = await memory.query(query)
        rankings.append(
            QuestionRanking(
                question_id=question.question_id,
                evidence=frozenset(question.evidence_turns),
                ranked=ranked_turns(result, turn_of),
                category=question.category,
                abstention=question.abstention,
                hit_kinds=tuple(hit.kind for hit in result.hits),
                ms=(time.perf_counter() - started) * 1000,
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


async def abstention(memory: MemoryClient, dataset: Dataset) -> dict[str, Any]:
    """Whether the default checkout says `answer_from_memory`, for questions with and without an answer."""
    answered: list[tuple[bool, bool]] = []  # (the question has no answer in memory, the checkout answered)
    for conversation in dataset.conversations:
        for question in conversation.questions:
            if not question.abstention and not question.evidence_turns:
                continue
            request = CheckoutRequest(text=question.text[:MAX_QUERY_CHARS], session=conversation.session)
            checkout = await memory.checkout(request)
            answered.append((question.abstention, checkout.answerability.answer_from_memory))
    return report_dict(abstention_scores(answered))


async def score_dataset(
    memory: MemoryClient, dataset: Dataset, turn_of: dict[tuple[str, int], str], chosen: list[Variant]
) -> dict[str, Any]:
    scores: dict[str, Any] = {}
    with progress_bar() as progress:
        task = progress.add_task("ask", total=len(chosen) * len(dataset.questions), rate="")
        for variant in chosen:
            rankings: list[QuestionRanking] = []
            for conversation in dataset.conversations:
                rankings += await rank(memory, conversation, variant, turn_of)
                progress.advance(task, len(conversation.questions))
            entry = {"turns": report_dict(evaluate(rankings))}
            if dataset.source == "longmemeval":
                entry["sessions"] = report_dict(evaluate(by_session(rankings, dataset)))
            scores[variant.label] = entry
    return scores


def headline(scores: dict[str, Any]) -> dict[str, Any]:
    def overall(label: str, k: str) -> float:
        return float(scores[label]["turns"]["overall"]["recall"][k])

    lanes = [label for label in scores if label.startswith("lane:")]
    best = max(lanes, key=lambda label: overall(label, "@5")) if lanes else "bm25"
    found: dict[str, Any] = {
        "default_recall@1": overall(DEFAULT_PROFILE, "@1"),
        "default_recall@5": overall(DEFAULT_PROFILE, "@5"),
        "bm25_recall@1": overall("bm25", "@1"),
        "bm25_recall@5": overall("bm25", "@5"),
        "best_lane": best,
        "best_lane_recall@5": overall(best, "@5"),
    }
    found["default_minus_best_lane_recall@5"] = round(
        found["default_recall@5"] - found["best_lane_recall@5"], 4
    )
    return found


@dataclass
class DatasetMemory:
    """A dataset appended to a fresh log, its read models built and open, its turns known by citation."""

    dataset: Dataset
    settings: Settings
    url: str
    models: BuiltModels
    turn_of: dict[tuple[str, int], str]


@contextlib.asynccontextmanager
async def dataset_memory(path: Path, embedder: str | None) -> AsyncIterator[DatasetMemory]:
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
                    yield DatasetMemory(dataset, settings, url, models, turn_of)
        finally:
            await nats.stop()


async def run_dataset(path: Path, embedder: str | None, chosen: list[Variant]) -> dict[str, Any]:
    async with dataset_memory(path, embedder) as memory:
        stop, ready = asyncio.Event(), asyncio.Event()
        service = asyncio.create_task(serve_memory(memory.models.client, memory.models.memory, stop, ready))
        await ready.wait()
        client = await connect(memory.url, name="bench-retrieval")
        try:
            asker = MemoryClient(client)
            scores = await score_dataset(asker, memory.dataset, memory.turn_of, chosen)
            abstained = await abstention(asker, memory.dataset)
        finally:
            stop.set()
            await service
            await client.close()
    dataset = memory.dataset
    console.print(f"[bold]{path.name}[/]: {headline(scores)}")
    return {
        "file": str(path),
        "format": dataset.source,
        "conversations": len(dataset.conversations),
        "questions": len(dataset.questions),
        "load_issues": dataset.report.counts(),
        "embedder": memory.settings.embedder,
        "default_profile": DEFAULT_PROFILE,
        **headline(scores),
        "abstention": abstained,
        "results": scores,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    paths = args.dataset or list(DEFAULT_DATASETS)
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown or DEFAULT_PROFILE not in profiles:
        known = ", ".join(PROFILES)
        raise SystemExit(f"--profiles: expected some of {known}, including {DEFAULT_PROFILE}")
    chosen = variants(profiles, lanes_alone=not args.no_lanes)
    return {
        "benchmark": "retrieval",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/retrieval.py " + " ".join(sys.argv[1:]),
        "machine": machine(server_binary_version()),
        "limit": LIMIT,
        "datasets": [await run_dataset(path, args.embedder, chosen) for path in paths],
    }


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
