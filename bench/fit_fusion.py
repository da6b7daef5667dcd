"""Fit the calibrated fusion's logistic model on development data; prints one JSON object.

For every answerable question of every dataset, the retriever's first stage gathers its candidates (the
default profile, the same pools as in service) and each candidate is labelled by whether it cites one of
the question's evidence turns. A logistic regression (L2-regularized, Newton's method, numpy) fits the
coefficients of `readmodels.retrieval.calibrated.FEATURES`, except those conversational data cannot
teach (`FIXED`: named entities, graph traversal, source chunks), which keep their set values.

The output's `calibration` is what `readmodels/retrieval/calibration.py` keeps for the vector space.
It also reports, per dataset, turn-level Recall@5 of the fitted ordering next to BM25's, the generic
coefficients' and plain reciprocal rank fusion's (keyword and vector) in the same run, and a
leave-one-dataset-out check: fitted without a dataset, scored on it. The abstention threshold is
the top-hit probability that best separates the questions with an answer in memory from those without.

    python bench/fit_fusion.py --dataset ../shared/data/beam500k-dev.json   # plus the two fixtures
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec
import numpy as np
import numpy.typing as npt
from common import console, progress_bar
from retrieval import DEFAULT_DATASETS, LIMIT, DatasetMemory, dataset_memory, ranked_turns
from retrieval_metrics import recall_at_k

from readmodels.retrieval.calibrated import FEATURES, Calibration
from readmodels.retrieval.calibration import GENERIC
from readmodels.retrieval.fusion import DEFAULT_PROFILE
from readmodels.retrieval.model import MAX_QUERY_CHARS, Query

FIXED: Final = ("exact", "traversal", "verbatim", "verbatim_rr", "verbatim_rrf", "entity", "source")
"""Features conversational data has no examples of: they keep `GENERIC`'s values."""
FITTED: Final = tuple(name for name in FEATURES if name not in FIXED)
L2: Final = 1.0
ASCENT_PASSES: Final = 4
ASCENT_STEPS: Final = (-1.0, -0.5, -0.25, 0.25, 0.5, 1.0)
RRF_START: Final = ("keyword_rrf", "vector_rrf")
"""The second starting point: plain reciprocal rank fusion of BM25 and the vectors, robust everywhere."""
Matrix = npt.NDArray[np.float64]


@dataclass
class Question:
    dataset: str
    evidence: frozenset[str]
    abstention: bool
    features: list[dict[str, float]] = field(default_factory=list)
    turns: list[frozenset[str]] = field(default_factory=list)
    """Per candidate, the turns it cites."""
    bm25_ranked: tuple[frozenset[str], ...] = ()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", action="append", type=Path, help="LoCoMo/LongMemEval file (repeatable)")
    parser.add_argument("--no-fixtures", action="store_true", help="leave out the two fixtures in tests/")
    parser.add_argument("--embedder", default=None, help="vector embedder (default: the configured one)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def candidates(memory: DatasetMemory) -> list[Question]:
    retriever = memory.models.memory.retriever
    found: list[Question] = []
    dataset = memory.dataset
    with progress_bar() as progress:
        task = progress.add_task(f"gather {Path(dataset.path).name}", total=len(dataset.questions), rate="")
        for conversation in dataset.conversations:
            for q in conversation.questions:
                progress.advance(task)
                if not q.abstention and not q.evidence_turns:
                    continue
                text = q.text[:MAX_QUERY_CHARS]
                query = Query(text=text, session=conversation.session, limit=LIMIT, profile=DEFAULT_PROFILE)
                gathered = await retriever.gather(query)
                values = gathered.order.features(gathered.lanes)
                result = await retriever.answer(gathered, None)
                bm25 = await retriever.query(msgspec.structs.replace(query, lanes=["keyword"]))
                question = Question(
                    dataset=Path(dataset.path).name,
                    evidence=frozenset(q.evidence_turns),
                    abstention=q.abstention,
                    bm25_ranked=ranked_turns(bm25, memory.turn_of),
                )
                for hit in result.hits:
                    cited = {memory.turn_of.get((c.session, c.seq)) for c in hit.citations}
                    question.features.append(values[hit.key])
                    question.turns.append(frozenset(t for t in cited if t is not None))
                found.append(question)
    return found


def design(questions: Sequence[Question]) -> tuple[Matrix, Matrix]:
    rows = [[f.get(name, 0.0) for name in FITTED] for q in questions for f in q.features]
    labels = [float(bool(turns & q.evidence)) for q in questions for turns in q.turns]
    return np.asarray(rows, dtype=np.float64).reshape(-1, len(FITTED)), np.asarray(labels, dtype=np.float64)


def fit(questions: Sequence[Question]) -> tuple[float, dict[str, float]]:
    """(bias, coefficients): a logistic regression, then coordinate ascent on the ranking itself.

    1. A logistic regression (L2, Newton's method) over every candidate: a sound starting point, but it
       scores candidates one by one, while what matters is the order within each question.
    2. Coordinate ascent (Metzler and Croft, 2007), from the better of that and plain reciprocal rank
       fusion of the keyword and vector lanes, moves one coefficient at a time, by steps of a grid, to
       maximize the mean over datasets (each counts the same, whatever its size) of Recall@5 plus a
       quarter of Recall@1.
    3. The ordering's scale and bias are refitted by a one-variable logistic regression, so the score
       is again a calibrated probability (what abstention reads).
    """
    scored = [q for q in questions if not q.abstention and q.features]
    _, regression = _logistic(*design(scored))
    fusion = np.asarray([1.0 if name in RRF_START else 0.0 for name in FITTED])
    weights = _ascend(scored, [regression, fusion])
    x, y = design(scored)
    bias, scale = _logistic((x @ weights)[:, None], y)
    fitted = weights * float(scale[0])
    return float(bias), {name: round(float(v), 4) for name, v in zip(FITTED, fitted, strict=True)}


def _logistic(x: Matrix, y: Matrix) -> tuple[float, Matrix]:
    """(bias, weights) of an L2-regularized logistic regression, by Newton's method."""
    x = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * L2
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return float(w[0]), w[1:]


def _ascend(questions: Sequence[Question], starts: Sequence[Matrix]) -> Matrix:
    matrices = [np.asarray([[f.get(name, 0.0) for name in FITTED] for f in q.features]) for q in questions]
    datasets = sorted({q.dataset for q in questions})

    def objective(w: Matrix) -> float:
        per: dict[str, list[tuple[float, float]]] = {name: [] for name in datasets}
        for q, m in zip(questions, matrices, strict=True):
            order = np.argsort(-(m @ w), kind="stable")[:LIMIT]
            ranked = _turns_in_order(q, [int(i) for i in order])
            per[q.dataset].append((recall_at_k(ranked, q.evidence, 5), recall_at_k(ranked, q.evidence, 1)))
        means = [float(np.mean([r5 + 0.25 * r1 for r5, r1 in scores])) for scores in per.values()]
        return sum(means) / len(means)

    best, w = max(((objective(start), start.copy()) for start in starts), key=lambda pair: pair[0])
    for _ in range(ASCENT_PASSES):
        improved = False
        for j in range(len(w)):
            for factor in ASCENT_STEPS:
                trial = w.copy()
                trial[j] += factor * max(abs(w[j]), 0.5)
                value = objective(trial)
                if value > best + 1e-9:
                    w, best, improved = trial, value, True
        if not improved:
            break
    return w


def _turns_in_order(question: Question, order: Sequence[int]) -> tuple[frozenset[str], ...]:
    seen: dict[str, None] = {}
    for index in order:
        seen.update(dict.fromkeys(sorted(question.turns[index])))
    return tuple(frozenset([turn]) for turn in seen)


def calibration(vector_space: str, bias: float, fitted: dict[str, float], data: str) -> Calibration:
    coefficients = {name: GENERIC.coefficients.get(name, 0.0) for name in FIXED} | fitted
    return Calibration(
        vector_space=vector_space, bias=round(bias, 4), coefficients=coefficients, fitted_on=data
    )


def probabilities(question: Question, model: Calibration) -> list[float]:
    logits = [
        model.bias + sum(model.coefficients.get(name, 0.0) * value for name, value in f.items())
        for f in question.features
    ]
    return [float(1.0 / (1.0 + np.exp(-logit))) for logit in logits]


def ordered_turns(question: Question, model: Calibration) -> tuple[frozenset[str], ...]:
    chances = np.asarray(probabilities(question, model))
    return _turns_in_order(question, [int(i) for i in np.argsort(-chances, kind="stable")[:LIMIT]])


def recall5(questions: Sequence[Question], model: Calibration | None) -> float:
    scored = [q for q in questions if not q.abstention]
    if not scored:
        return 0.0
    ranked = [ordered_turns(q, model) if model else q.bm25_ranked for q in scored]
    total = sum(recall_at_k(r, q.evidence, 5) for r, q in zip(ranked, scored, strict=True))
    return round(total / len(scored), 4)


def abstention_threshold(questions: Sequence[Question], model: Calibration) -> dict[str, float]:
    """The top-hit probability below which a checkout should not answer, by the best balanced accuracy."""
    tops = [(max(probabilities(q, model), default=0.0), q.abstention) for q in questions]
    unanswerable = [top for top, missing in tops if missing]
    answerable = [top for top, missing in tops if not missing]
    if not unanswerable or not answerable:
        return {}
    best = (0.0, 0.0)
    for threshold in sorted({round(top, 3) for top, _ in tops}):
        specificity = sum(top < threshold for top in unanswerable) / len(unanswerable)
        sensitivity = sum(top >= threshold for top in answerable) / len(answerable)
        best = max(best, ((specificity + sensitivity) / 2, threshold))
    return {"threshold": float(best[1]), "balanced_accuracy": round(float(best[0]), 4)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    paths = list(args.dataset or []) + ([] if args.no_fixtures else list(DEFAULT_DATASETS))
    questions: list[Question] = []
    vector_space = ""
    for path in paths:
        async with dataset_memory(path, args.embedder) as memory:
            vector = memory.models.memory.retriever.read_models().vector
            vector_space = vector.tag if vector is not None else ""
            questions += await candidates(memory)
    names = sorted({q.dataset for q in questions})
    bias, fitted = fit(questions)
    model = calibration(vector_space, bias, fitted, ", ".join(names))
    per_dataset: dict[str, Any] = {}
    for name in names:
        own = [q for q in questions if q.dataset == name]
        others = [q for q in questions if q.dataset != name]
        held_out = calibration(vector_space, *fit(others), "") if others else None
        per_dataset[name] = {
            "bm25_recall@5": recall5(own, None),
            "fitted_recall@5": recall5(own, model),
            "generic_recall@5": recall5(own, msgspec.structs.replace(GENERIC, vector_space=vector_space)),
            "rrf_recall@5": recall5(own, calibration(vector_space, 0.0, dict.fromkeys(RRF_START, 1.0), "")),
            "held_out_recall@5": recall5(own, held_out) if held_out else None,
        }
        console.print(f"{name}: {per_dataset[name]}")
    return {
        "benchmark": "fit_fusion",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/fit_fusion.py " + " ".join(sys.argv[1:]),
        "vector_space": vector_space,
        "candidates": sum(len(q.features) for q in questions),
        "questions": len(questions),
        "calibration": msgspec.to_builtins(model),
        "abstention": abstention_threshold(questions, model),
        "datasets": per_dataset,
    }


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
