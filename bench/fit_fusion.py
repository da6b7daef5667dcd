"""Fit the calibrated fusion's probability scale on development data; prints one JSON object.

For every answerable question of every dataset, the retriever's first stage gathers its candidates (the
default profile, the same pools as in service) and each candidate is labelled by whether it cites one of
the question's evidence turns. The ordering of document hits has no fitted weight (the gated features of
`readmodels.retrieval.calibrated`: each lane's z-scores, weighed by how far its best stand out); one
logistic regression (L2-regularized, Newton's method, numpy) of the label on their sum, with the set
features (`FIXED`: named entities, traversal, source chunks, recency) as an offset, fits the bias and the
one coefficient that make the score a probability.

The output's `calibration` is what `readmodels/retrieval/calibration.py` keeps. Per dataset it reports
turn-level Recall@5 of the fitted model in-sample and leave-one-dataset-out (fitted without the dataset,
scored on it) next to BM25's and the generic coefficients', in the same run; and the top-hit probability
that best separates the questions with an answer in memory from those without (abstention).

    python bench/fit_fusion.py --no-fixtures \
        --dataset ../shared/data/beam500k-dev.json --dataset ../shared/data/locomo-dev.json
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

from readmodels.retrieval.calibrated import Calibration
from readmodels.retrieval.calibration import GENERIC
from readmodels.retrieval.fusion import DEFAULT_PROFILE
from readmodels.retrieval.model import MAX_QUERY_CHARS, Query

GATED: Final = ("keyword_gated", "vector_gated")
"""The gated fusion's features: one coefficient for both (the gates already weigh the lanes)."""
FIXED: Final = tuple(name for name in GENERIC.coefficients if name not in GATED)
"""Features conversational data has few or no examples of (named entities, traversal, source chunks,
recency): they keep `GENERIC`'s values."""
L2: Final = 1.0
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


def fit(questions: Sequence[Question]) -> tuple[float, dict[str, float]]:
    """(bias, coefficients): one logistic regression (L2, Newton's method) of "cites an evidence turn"
    on the gated sum of the lanes, with the fixed features as an offset. The ordering of document hits
    has no fitted weight: the fit only scales it into a probability, which abstention reads."""
    scored = [q for q in questions if not q.abstention and q.features]
    rows = [f for q in scored for f in q.features]
    x = np.asarray([[sum(f.get(name, 0.0) for name in GATED)] for f in rows], dtype=np.float64).reshape(-1, 1)
    offset = np.asarray([sum(GENERIC.coefficients[n] * f.get(n, 0.0) for n in FIXED) for f in rows])
    y = np.asarray([float(bool(t & q.evidence)) for q in scored for t in q.turns], dtype=np.float64)
    bias, weights = _logistic(x, y, offset)
    scale = round(float(weights[0]), 4)
    return float(bias), dict.fromkeys(GATED, scale)


def _logistic(x: Matrix, y: Matrix, offset: Matrix | None = None) -> tuple[float, Matrix]:
    """(bias, weights) of an L2-regularized logistic regression, by Newton's method."""
    x = np.hstack([np.ones((len(x), 1)), x])
    fixed = np.zeros(len(x)) if offset is None else offset
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * L2
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ w + fixed)))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return float(w[0]), w[1:]


def _turns_in_order(question: Question, order: Sequence[int]) -> tuple[frozenset[str], ...]:
    seen: dict[str, None] = {}
    for index in order:
        seen.update(dict.fromkeys(sorted(question.turns[index])))
    return tuple(frozenset([turn]) for turn in seen)


def calibration(vector_space: str, bias: float, fitted: dict[str, float], data: str) -> Calibration:
    coefficients = {name: GENERIC.coefficients[name] for name in FIXED} | fitted
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
