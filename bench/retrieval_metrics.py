"""Retrieval quality of ranked results against a question's evidence: Recall@k, hit@k, MRR and nDCG@10.

A result is the set of turn ids it cites, so a result that quotes several turns (a session, a merged chunk)
counts for each of them. Scoring at session level, as LongMemEval does, is the same computation after
`to_sessions` maps every cited turn to its session. Next to quality, a report keeps what the answers were
made of (the share of the top-5 hits of each kind: entity, event, source) and how long they took.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec
from common import percentiles

Ranked = Sequence[Collection[str]]
"""Results in rank order, best first; each is the ids it cites."""

DEFAULT_KS: Final = (1, 5, 10)
MRR_CUTOFF: Final = 10
NDCG_CUTOFF: Final = 10
KIND_SLOTS: Final = 5
HIT_KINDS: Final = ("entity", "event", "source")
_DIGITS: Final = 4


class QuestionRanking(msgspec.Struct, frozen=True, kw_only=True):
    """One question's results and what should have been found."""

    question_id: str
    evidence: frozenset[str]
    ranked: tuple[frozenset[str], ...]
    category: str = ""
    abstention: bool = False
    hit_kinds: tuple[str, ...] = ()
    """The kind of each hit, in rank order (hits, not turns: a hit citing three turns is one hit)."""
    ms: float | None = None
    """How long the question took, asked through the query service (round trip)."""


class Scores(msgspec.Struct, frozen=True, kw_only=True):
    """Means over the scored questions; `recall` and `hit` are keyed `@k`."""

    questions: int
    recall: dict[str, float]
    hit: dict[str, float]
    mrr: float
    ndcg10: float


class RetrievalReport(msgspec.Struct, frozen=True, kw_only=True):
    questions: int
    scored: int
    skipped_abstention: int  # a false premise has nothing to find (LongMemEval's `_abs`, LoCoMo category 5)
    skipped_no_evidence: int
    ks: tuple[int, ...]
    mrr_cutoff: int
    overall: Scores
    by_category: dict[str, Scores]
    top5_kind_share: dict[str, float]
    """Of the top-5 hits of every question asked (abstentions too), the share of each kind."""
    latency_ms: dict[str, float] | None
    """p50, p95 and max of the questions' round trips."""


def cited(ranked: Ranked, k: int) -> set[str]:
    """Every id the top `k` results cite."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return {item for result in ranked[:k] for item in result}


def recall_at_k(ranked: Ranked, evidence: Collection[str], k: int) -> float:
    """The share of the evidence cited by the top `k` results."""
    wanted = set(evidence)
    if not wanted:
        raise ValueError("recall is undefined without evidence")
    return len(cited(ranked, k) & wanted) / len(wanted)


def hit_at_k(ranked: Ranked, evidence: Collection[str], k: int) -> bool:
    """Whether the top `k` results cite any of the evidence."""
    return not cited(ranked, k).isdisjoint(evidence)


def reciprocal_rank(ranked: Ranked, evidence: Collection[str], cutoff: int = MRR_CUTOFF) -> float:
    """1 / rank of the first result citing any evidence; 0 if none does within `cutoff`."""
    wanted = set(evidence)
    for rank, result in enumerate(ranked[:cutoff], start=1):
        if not wanted.isdisjoint(result):
            return 1.0 / rank
    return 0.0


def ndcg_at_k(ranked: Ranked, evidence: Collection[str], k: int = NDCG_CUTOFF) -> float:
    """Normalized discounted cumulative gain of binary relevance: each evidence id counts once, at the
    first result citing it; the ideal ranking cites one evidence id per result."""
    wanted = set(evidence)
    if not wanted:
        raise ValueError("nDCG is undefined without evidence")
    seen: set[str] = set()
    gain = 0.0
    for rank, result in enumerate(ranked[:k], start=1):
        new = (set(result) & wanted) - seen
        seen |= new
        gain += len(new) / math.log2(rank + 1)
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, min(len(wanted), k) + 1))
    return gain / ideal


def to_sessions(ranked: Ranked, session_of: Mapping[str, str]) -> tuple[frozenset[str], ...]:
    """The ranking over sessions: each result cites the sessions of its turns that no better result cited.

    A result adding no new session is dropped, so `k` counts distinct sessions, as LongMemEval's own
    turn-to-session evaluation does. Ids of no known turn are ignored.
    """
    seen: set[str] = set()
    sessions: list[frozenset[str]] = []
    for result in ranked:
        new = frozenset(session_of[item] for item in result if item in session_of) - seen
        if new:
            sessions.append(new)
            seen |= new
    return tuple(sessions)


def evaluate(
    rankings: Iterable[QuestionRanking], ks: Sequence[int] = DEFAULT_KS, mrr_cutoff: int = MRR_CUTOFF
) -> RetrievalReport:
    """Score every question that has something to find; count the ones skipped and why."""
    if not ks or min(ks) < 1:
        raise ValueError(f"ks must be positive, got {list(ks)}")
    total = abstentions = without_evidence = 0
    overall: list[_QuestionScore] = []
    by_category: defaultdict[str, list[_QuestionScore]] = defaultdict(list)
    kinds: list[str] = []
    times: list[float] = []
    for ranking in rankings:
        total += 1
        kinds.extend(ranking.hit_kinds[:KIND_SLOTS])
        if ranking.ms is not None:
            times.append(ranking.ms)
        if ranking.abstention:
            abstentions += 1
            continue
        if not ranking.evidence:
            without_evidence += 1
            continue
        score = _score(ranking, ks, mrr_cutoff)
        overall.append(score)
        by_category[ranking.category].append(score)
    return RetrievalReport(
        questions=total,
        scored=len(overall),
        skipped_abstention=abstentions,
        skipped_no_evidence=without_evidence,
        ks=tuple(ks),
        mrr_cutoff=mrr_cutoff,
        overall=_mean(overall, ks),
        by_category={category: _mean(scores, ks) for category, scores in sorted(by_category.items())},
        top5_kind_share={kind: _share(kinds, kind) for kind in HIT_KINDS},
        latency_ms=percentiles(times) if times else None,
    )


class AbstentionScores(msgspec.Struct, frozen=True, kw_only=True):
    """How well "not in memory" was told apart: abstaining (no `answer_from_memory`) is the positive call."""

    questions: int
    unanswerable: int
    abstained: int
    precision: float
    """Of the questions where the checkout abstained, the share that had no answer in memory."""
    recall: float
    """Of the questions with no answer in memory, the share where the checkout abstained."""
    answered_when_answerable: float
    """Of the questions with an answer in memory, the share where the checkout said `answer_from_memory`."""


def abstention_scores(calls: Sequence[tuple[bool, bool]]) -> AbstentionScores:
    """From (the question has no answer in memory, the checkout answered from memory) per question."""
    unanswerable = sum(1 for missing, _ in calls if missing)
    abstained = sum(1 for _, answered in calls if not answered)
    right = sum(1 for missing, answered in calls if missing and not answered)
    answerable = len(calls) - unanswerable
    answered = sum(1 for missing, answered in calls if not missing and answered)
    return AbstentionScores(
        questions=len(calls),
        unanswerable=unanswerable,
        abstained=abstained,
        precision=round(right / abstained, _DIGITS) if abstained else 0.0,
        recall=round(right / unanswerable, _DIGITS) if unanswerable else 0.0,
        answered_when_answerable=round(answered / answerable, _DIGITS) if answerable else 0.0,
    )


def _share(items: Sequence[str], item: str) -> float:
    return round(items.count(item) / len(items), _DIGITS) if items else 0.0


def report_dict(report: RetrievalReport | AbstentionScores) -> dict[str, Any]:
    """The report as plain JSON data, for the harness to print next to other reports."""
    data: dict[str, Any] = msgspec.to_builtins(report)
    return data


class _QuestionScore(msgspec.Struct, frozen=True):
    recall: tuple[float, ...]
    hit: tuple[bool, ...]
    reciprocal_rank: float
    ndcg10: float


def _score(ranking: QuestionRanking, ks: Sequence[int], mrr_cutoff: int) -> _QuestionScore:
    return _QuestionScore(
        recall=tuple(recall_at_k(ranking.ranked, ranking.evidence, k) for k in ks),
        hit=tuple(hit_at_k(ranking.ranked, ranking.evidence, k) for k in ks),
        reciprocal_rank=reciprocal_rank(ranking.ranked, ranking.evidence, mrr_cutoff),
        ndcg10=ndcg_at_k(ranking.ranked, ranking.evidence),
    )


def _mean(scores: Sequence[_QuestionScore], ks: Sequence[int]) -> Scores:
    count = len(scores)

    def average(values: Iterable[float]) -> float:
        return round(sum(values) / count, _DIGITS) if count else 0.0

    return Scores(
        questions=count,
        recall={f"@{k}": average(s.recall[i] for s in scores) for i, k in enumerate(ks)},
        hit={f"@{k}": average(float(s.hit[i]) for s in scores) for i, k in enumerate(ks)},
        mrr=average(s.reciprocal_rank for s in scores),
        ndcg10=average(s.ndcg10 for s in scores),
    )
