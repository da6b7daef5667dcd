"""Calibrated fusion: every candidate's chance of answering the question, from what every lane saw of it.

Raw lane scores do not compare (BM25 is unbounded and depends on the question's words; a cosine of 0.4 is
strong in one vector space and noise in another), and which lane finds more flips with the kind of
conversation: short casual turns are found by their words, long technical turns by their meaning. No fixed
weighting of the lanes holds on both (a fit where the vectors win lands between the lanes where words win).
So the document lanes are fused by how each did *on this question*:

- `<lane>_gated` (keyword, vector): the candidate's z-score in the lane, (score - mean) / deviation over
  every document in scope (the store's `ScoreSpread`; unmatched documents score 0; estimated from the
  lane's own candidates when a store cannot say), times the lane's gate: the square of the mean z-score of
  the lane's best `GATE_TOP`, normalized over the lanes. A lane whose best stand far above the rest of the
  conversation speaks for the question; a lane whose scores are flat hardly counts. Nothing here is fitted:
  the gate is the same arithmetic on every corpus, which is why it holds on conversations it never saw;
- `exact`: the entity is named in the question; `traversal`: the hop and trust weight that reached it;
  `verbatim` (and its rank, `verbatim_rr`): BM25 over source text only, relative to the lane's best;
- the hit's kind (`entity`, `source`; an event is the reference), and `recency` (0 oldest .. 1 newest
  candidate) signed by the question's time intent (`readmodels.retrieval.temporal`).

The fusion this replaced weighed each lane's rank and relative score by coefficients fitted on the BEAM
development set; on LoCoMo-kind conversations it ranked below BM25 alone (docs/retrieval.md).

A logistic model turns the features into a probability: `p = 1 / (1 + exp(-(bias + sum of coefficient x
feature)))`. `bench/fit_fusion.py` fits only its bias and the gated features' one coefficient (the scale
of the probability), on development data; `readmodels/retrieval/calibration.py` keeps them. The explanation
of a hit lists each lane's part of the sum (its `contribution`) and the rest (bias, kind, recency) as `base`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from readmodels.documents import ScoreSpread
from readmodels.retrieval.fusion import RRF_K, Contribution, FusedHit, LaneHit, Profile

FEATURES: Final = (
    "keyword_gated",
    "vector_gated",
    "exact",
    "traversal",
    "verbatim",
    "verbatim_rr",
    "verbatim_rrf",
    "entity",
    "source",
    "recency",
)
LANE_OF_FEATURE: Final = {
    "keyword_gated": "keyword",
    "vector_gated": "vector",
    "exact": "exact",
    "traversal": "traversal",
    "verbatim": "verbatim",
    "verbatim_rr": "verbatim",
    "verbatim_rrf": "verbatim",
}


class Calibration(msgspec.Struct, frozen=True, kw_only=True):
    """A fitted logistic model: `bias` and one coefficient per feature (missing ones count 0)."""

    vector_space: str
    bias: float
    coefficients: dict[str, float]
    fitted_on: str = ""


@dataclass(frozen=True)
class Candidate:
    """What the second stage knows of one key: each lane's (raw score, rank), and its time if known."""

    key: str
    lanes: dict[str, tuple[float, int]]
    ts: str | None
    returned: frozenset[str] = frozenset()
    """The lanes whose search returned it (the others only scored it on request)."""


def collect(lanes: Mapping[str, Sequence[LaneHit]], times: Mapping[str, str]) -> dict[str, Candidate]:
    """Every key any lane found, with its best rank in each lane."""
    found: dict[str, dict[str, tuple[float, int]]] = {}
    returned: dict[str, set[str]] = {}
    for lane, hits in lanes.items():
        for rank, hit in enumerate(hits):
            found.setdefault(hit.key, {}).setdefault(lane, (hit.score, rank))
            if not hit.completed:
                returned.setdefault(hit.key, set()).add(lane)
    return {
        key: Candidate(key=key, lanes=seen, ts=times.get(key), returned=frozenset(returned.get(key, ())))
        for key, seen in found.items()
    }


GATED_LANES: Final = ("keyword", "vector")
GATE_TOP: Final = 5
GATE_POWER: Final = 2.0


def gated(
    candidates: Mapping[str, Candidate],
    lanes: Mapping[str, Sequence[LaneHit]],
    spreads: Mapping[str, ScoreSpread | None],
    pool: int,
) -> dict[str, dict[str, float]]:
    """Each candidate's `<lane>_gated` features: the lanes' z-scores, each lane weighed by how far its own
    best stand out for this question (see the module's documentation). A lane with no spread of its own
    (a store that cannot say) is measured on what it returned."""
    z: dict[str, dict[str, float]] = {}
    gates: dict[str, float] = {}
    for lane in GATED_LANES:
        hits = lanes.get(lane) or []
        returned = [hit.score for hit in hits if not hit.completed]
        if not returned:
            continue
        spread = spreads.get(lane) or _spread_of(returned)
        # not returned and not scored on request: at most the lane's last score, or none when it returned
        # fewer than it was asked for (it had nothing more)
        missing = min(returned) if len(returned) >= pool else 0.0
        z[lane] = {
            key: spread.z(c.lanes[lane][0] if lane in c.lanes else missing) for key, c in candidates.items()
        }
        best = sorted((spread.z(score) for score in returned), reverse=True)[:GATE_TOP]
        gates[lane] = max(0.0, sum(best) / len(best)) ** GATE_POWER
    total = sum(gates.values())
    if total <= 0:  # no lane's best stand out (or too few scores to tell): each counts the same
        gates = dict.fromkeys(gates, 1.0)
        total = float(len(gates)) or 1.0
    return {key: {f"{lane}_gated": gates[lane] / total * z[lane][key] for lane in z} for key in candidates}


def _spread_of(scores: Sequence[float]) -> ScoreSpread:
    mean = sum(scores) / len(scores)
    std = (sum((s - mean) ** 2 for s in scores) / len(scores)) ** 0.5
    return ScoreSpread(documents=len(scores), mean=mean, std=std)


def features(
    candidates: Mapping[str, Candidate],
    lanes: Mapping[str, Sequence[LaneHit]],
    intent: int,
    spreads: Mapping[str, ScoreSpread | None] | None = None,
    pool: int = 0,
) -> dict[str, dict[str, float]]:
    """The feature values of every candidate (see the module's documentation)."""
    gated_values = gated(candidates, lanes, spreads or {}, pool)
    returned = {lane: [h.score for h in hits if not h.completed] for lane, hits in lanes.items()}
    best = {lane: max(scores, default=0.0) for lane, scores in returned.items()}
    order = sorted({c.ts for c in candidates.values() if c.ts})
    position = {ts: (i / (len(order) - 1) if len(order) > 1 else 1.0) for i, ts in enumerate(order)}
    values: dict[str, dict[str, float]] = {}
    for key, candidate in candidates.items():
        f: dict[str, float] = {}
        if "verbatim" in lanes:
            raw, rank = candidate.lanes.get("verbatim", (0.0, -1))
            f["verbatim"] = raw / best["verbatim"] if best["verbatim"] > 0 else 0.0
            f.update(_rank_features("verbatim", rank if "verbatim" in candidate.returned else -1))
        if "exact" in candidate.lanes:
            f["exact"] = 1.0
        if "traversal" in candidate.lanes:
            f["traversal"] = candidate.lanes["traversal"][0]
        f["entity"] = float(key.startswith("entity:"))
        f["source"] = float(key.startswith("source:"))
        f["recency"] = intent * (position[candidate.ts] - 0.5) * 2 if candidate.ts and intent else 0.0
        f.update(gated_values[key])
        values[key] = f
    return values


def fuse_calibrated(
    lanes: Mapping[str, Sequence[LaneHit]],
    chosen: Profile,
    calibration: Calibration,
    *,
    times: Mapping[str, str] | None = None,
    intent: int = 0,
    limit: int | None = None,
    spreads: Mapping[str, ScoreSpread | None] | None = None,
    pool: int = 0,
) -> list[FusedHit]:
    """One ranking by the calibrated probability; a single lane keeps its own order (a diagnosis)."""
    used = {lane: hits for lane, hits in lanes.items() if chosen.weights.get(lane, 0.0) > 0}
    candidates = collect(used, times or {})
    values = features(candidates, used, intent, spreads, pool)
    fused: list[FusedHit] = []
    for key, candidate in candidates.items():
        parts: dict[str, float] = {}
        base = calibration.bias
        for name, value in values[key].items():
            term = calibration.coefficients.get(name, 0.0) * value
            lane = LANE_OF_FEATURE.get(name)
            if lane is None:
                base += term
            else:
                parts[lane] = parts.get(lane, 0.0) + chosen.weights.get(lane, 1.0) * term
        contributions = {
            lane: Contribution(
                raw=raw, rank=rank, weight=chosen.weights[lane], contribution=parts.get(lane, 0.0)
            )
            for lane, (raw, rank) in candidate.lanes.items()
        }
        # a lane that did not return the candidate still weighed in (with its floor): its part goes to base
        base += sum(part for lane, part in parts.items() if lane not in contributions)
        logit = base + sum(c.contribution for c in contributions.values())
        fused.append(FusedHit(key=key, score=_logistic(logit), lanes=contributions, base=base))
    if len([hits for hits in used.values() if hits]) == 1:
        only = next(iter(lane for lane, hits in used.items() if hits))
        fused.sort(key=lambda hit: (hit.lanes[only].rank, hit.key))
    else:
        fused.sort(key=lambda hit: (-hit.score, hit.key))
    return fused if limit is None else fused[:limit]


def _rank_features(lane: str, rank: int) -> dict[str, float]:
    """A returned candidate's rank, steep (1 / (rank + 1)) and flat (61 / (61 + rank), reciprocal rank
    fusion's curve, scaled to 1 at the top); 0 for one the lane did not return."""
    if rank < 0:
        return {f"{lane}_rr": 0.0, f"{lane}_rrf": 0.0}
    return {f"{lane}_rr": 1.0 / (rank + 1), f"{lane}_rrf": (RRF_K + 1) / (RRF_K + 1 + rank)}


def _logistic(logit: float) -> float:
    if logit >= 0:
        return 1.0 / (1.0 + math.exp(-logit))
    exp = math.exp(logit)
    return exp / (1.0 + exp)
