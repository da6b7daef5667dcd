"""Fusing ranked lanes into one ranking, with the explanation of every score.

Each lane (exact name match, keyword, vector, graph traversal, verbatim source recall) returns hits in
its own order with its own raw scores, which are not comparable across lanes (BM25 is unbounded, cosine
lies in [-1, 1]). Three fusions are offered:

- `calibrated` (the default profile's): each candidate's probability of answering, from scale-free
  features of every lane by a logistic model fitted on development data (`readmodels.retrieval.calibrated`);
- `rrf`, reciprocal rank fusion: a hit at rank r (0-based) in a lane of weight w adds w / (k + r + 1);
  only ranks matter, so no lane's score scale can dominate (k = 60, as in Cormack et al. 2009);
- `score`: each lane's raw scores are min-max normalized to [0, 1] within the lane, then weighted and
  summed; it keeps how much better the best hit is, which ranks cannot.

A named profile sets the weights and the fusion; which fusion each profile uses was chosen by measurement
(`bench/retrieval.py`, see docs/benchmarks.md). Every fused hit keeps, per lane, its raw score, rank,
weight and contribution; the contributions sum to its score (`rrf`, `score`), or the logistic of their
sum and `base` is its score (`calibrated`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Literal

import msgspec

Lane = Literal["exact", "keyword", "vector", "traversal", "verbatim"]
LANES: Final[tuple[Lane, ...]] = ("exact", "keyword", "vector", "traversal", "verbatim")
Fusion = Literal["calibrated", "rrf", "score"]
RRF_K: Final = 60
DEFAULT_PROFILE: Final = "balanced"
"""The profile of a query or checkout that names none."""


class LaneHit(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    """What the hit is about (an entity key, a document id): hits with the same key are one result."""
    score: float
    completed: bool = False
    """Not returned by the lane, but scored by it on request (after its pool): only the calibrated fusion
    reads these; rank-based fusions leave them out."""


class Contribution(msgspec.Struct, frozen=True, kw_only=True):
    raw: float
    rank: int
    weight: float
    contribution: float


class FusedHit(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    score: float
    lanes: dict[str, Contribution]
    base: float = 0.0
    """What the calibrated fusion adds besides the lanes (bias, kind, recency); 0 for the others."""


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    fusion: Fusion
    weights: dict[str, float]
    recency: float = 0.0
    """Calibrated fusion only: added to the fitted recency coefficient, and newer evidence is preferred
    even when the question names no time of its own (a time intent of "latest" by default)."""


_EVERY_LANE: Final = {"exact": 1.0, "keyword": 1.0, "vector": 1.0, "traversal": 1.0, "verbatim": 1.0}
PROFILES: Final[dict[str, Profile]] = {
    "balanced": Profile(name="balanced", fusion="calibrated", weights=_EVERY_LANE),
    "precision": Profile(
        name="precision",
        fusion="calibrated",
        weights={"exact": 2.0, "keyword": 1.0, "vector": 1.0, "traversal": 0.3, "verbatim": 0.5},
    ),
    "recall": Profile(
        name="recall",
        fusion="rrf",
        weights={"exact": 1.0, "keyword": 1.0, "vector": 1.5, "traversal": 1.0, "verbatim": 1.0},
    ),
    "temporal": Profile(name="temporal", fusion="calibrated", weights=_EVERY_LANE, recency=1.0),
}


def profile(name: str) -> Profile:
    found = PROFILES.get(name)
    if found is None:
        raise ValueError(f"profile: expected one of {', '.join(PROFILES)}, got {name!r}")
    return found


def _normalized(hits: Sequence[LaneHit]) -> list[float]:
    if not hits:
        return []
    low, high = min(h.score for h in hits), max(h.score for h in hits)
    return [1.0 if high == low else (h.score - low) / (high - low) for h in hits]


def fuse(lanes: Mapping[str, Sequence[LaneHit]], chosen: Profile, limit: int | None = None) -> list[FusedHit]:
    """One ranking from the lanes' rankings (each best first); ties are broken by key, so it is stable."""
    parts: dict[str, dict[str, Contribution]] = {}
    for lane, hits in lanes.items():
        weight = chosen.weights.get(lane, 0.0)
        if weight <= 0:
            continue
        returned = [hit for hit in hits if not hit.completed]
        scaled = _normalized(returned) if chosen.fusion == "score" else []
        seen: set[str] = set()
        for rank, hit in enumerate(returned):
            if hit.key in seen:
                continue  # a lane counts a result once, at its best rank
            seen.add(hit.key)
            value = weight * (scaled[rank] if chosen.fusion == "score" else 1.0 / (RRF_K + rank + 1))
            parts.setdefault(hit.key, {})[lane] = Contribution(
                raw=hit.score, rank=rank, weight=weight, contribution=value
            )
    fused = [
        FusedHit(key=key, score=sum(c.contribution for c in contributions.values()), lanes=contributions)
        for key, contributions in parts.items()
    ]
    fused.sort(key=lambda hit: (-hit.score, hit.key))
    return fused if limit is None else fused[:limit]
