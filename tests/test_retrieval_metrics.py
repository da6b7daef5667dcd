"""The retrieval benchmark's metrics: Recall@k, hit@k and MRR, by turn and by session."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

# The bench scripts import each other as top-level modules (they run as `python bench/<name>.py`).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from datasets import load_dataset
from retrieval_metrics import (
    QuestionRanking,
    evaluate,
    hit_at_k,
    recall_at_k,
    reciprocal_rank,
    report_dict,
    to_sessions,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "retrieval"
LOCOMO = FIXTURES / "locomo_mini.json"
LONGMEMEVAL = FIXTURES / "longmemeval_mini.json"


def test_recall_hit_and_reciprocal_rank_by_hand() -> None:
    ranked = [{"a"}, {"x", "b"}, set(), {"c"}, {"b"}]
    evidence = {"b", "c", "z"}
    assert [recall_at_k(ranked, evidence, k) for k in (1, 2, 3, 4, 10)] == [0, 1 / 3, 1 / 3, 2 / 3, 2 / 3]
    assert [hit_at_k(ranked, evidence, k) for k in (1, 2)] == [False, True]
    assert reciprocal_rank(ranked, evidence) == 0.5
    assert reciprocal_rank(ranked, {"c"}) == 0.25
    assert reciprocal_rank(ranked, {"c"}, cutoff=3) == 0.0
    assert reciprocal_rank([], evidence) == 0.0
    with pytest.raises(ValueError, match="without evidence"):
        recall_at_k(ranked, set(), 1)
    with pytest.raises(ValueError, match="at least 1"):
        hit_at_k(ranked, evidence, 0)


def test_to_sessions_ranks_distinct_sessions() -> None:
    session_of = {"t1": "s1", "t2": "s1", "t3": "s2", "t4": "s3"}
    ranked = [{"t1", "t2"}, {"t2"}, {"t3", "gone"}, set(), {"t1", "t4"}]
    assert to_sessions(ranked, session_of) == (frozenset({"s1"}), frozenset({"s2"}), frozenset({"s3"}))
    # s3 is the third distinct session, though its turn came fifth.
    assert reciprocal_rank(to_sessions(ranked, session_of), {"s3"}) == pytest.approx(1 / 3)


def ranking(qid: str, evidence: set[str], ranked: list[set[str]], **extra: Any) -> QuestionRanking:
    return QuestionRanking(
        question_id=qid, evidence=frozenset(evidence), ranked=tuple(frozenset(r) for r in ranked), **extra
    )


def test_evaluate_averages_scored_questions_and_counts_the_skipped() -> None:
    rankings = [
        ranking("q1", {"t3", "t9"}, [{"t1"}, {"t2", "t3"}, {"t4"}], category="a"),  # R 0 .5 .5, RR 1/2
        ranking("q2", {"u1"}, [{"u1"}], category="a"),  # R 1 1 1, RR 1
        ranking("q3", {"v11"}, [{f"v{i}"} for i in range(1, 12)], category="b"),  # only at rank 11: all 0
        ranking("q4", {"w"}, [{"w"}], category="b", abstention=True),
        ranking("q5", set(), [{"w"}], category="b"),
    ]
    report = evaluate(rankings)
    assert (report.questions, report.scored) == (5, 3)
    assert (report.skipped_abstention, report.skipped_no_evidence) == (1, 1)
    assert report.overall.questions == 3
    assert report.overall.recall == {"@1": 0.3333, "@5": 0.5, "@10": 0.5}
    assert report.overall.hit == {"@1": 0.3333, "@5": 0.6667, "@10": 0.6667}
    assert report.overall.mrr == 0.5
    assert report.by_category["a"].recall == {"@1": 0.5, "@5": 0.75, "@10": 0.75}
    assert report.by_category["a"].mrr == 0.75
    assert report.by_category["b"].questions == 1 and report.by_category["b"].mrr == 0.0
    data = report_dict(report)
    assert json.loads(json.dumps(data))["overall"]["recall"]["@5"] == 0.5


def test_evaluate_with_nothing_to_score() -> None:
    report = evaluate([ranking("q", set(), [])], ks=(1, 3))
    assert (report.scored, report.skipped_no_evidence) == (0, 1)
    assert report.overall.recall == {"@1": 0.0, "@3": 0.0} and report.overall.mrr == 0.0
    with pytest.raises(ValueError, match="positive"):
        evaluate([], ks=(0,))


def test_fixture_questions_feed_the_metrics_at_both_levels() -> None:
    """What the harness will do: perfect results score 1, at turn and at session level."""
    dataset = load_dataset(LONGMEMEVAL)
    turn_level: list[QuestionRanking] = []
    session_level: list[QuestionRanking] = []
    for conversation in dataset.conversations:
        question = conversation.questions[0]
        ranked = (frozenset(question.evidence_turns),)
        for level, evidence, results in (
            (turn_level, question.evidence_turns, ranked),
            (session_level, question.evidence_sessions, to_sessions(ranked, conversation.session_of_turn())),
        ):
            level.append(
                QuestionRanking(
                    question_id=question.question_id,
                    evidence=frozenset(evidence),
                    ranked=results,
                    category=question.category,
                    abstention=question.abstention,
                )
            )
    for report in (evaluate(turn_level), evaluate(session_level)):
        assert (report.scored, report.skipped_abstention) == (12, 1)
        assert report.overall.recall["@1"] == 1.0 and report.overall.mrr == 1.0
