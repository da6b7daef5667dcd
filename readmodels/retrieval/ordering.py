"""How one question's candidates are ordered: the profile's fusion (calibrated, with the question's time
intent, or rrf / score), with the times of the candidates the calibrated fusion's recency feature needs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from readmodels.documents import ScoreSpread
from readmodels.retrieval.calibrated import collect, features, fuse_calibrated
from readmodels.retrieval.calibration import calibration_for
from readmodels.retrieval.fusion import FusedHit, LaneHit, Profile, fuse
from readmodels.retrieval.lanes import Candidate
from readmodels.retrieval.resolve import Resolved
from readmodels.retrieval.temporal import LATEST, NONE, time_intent


class Ordering:
    """The profile's fusion for one question: calibrated (with the question's time intent), rrf or score."""

    def __init__(
        self,
        chosen: Profile,
        vector_tag: str | None,
        text: str,
        lanes: Mapping[str, Sequence[Candidate]],
        resolved: Mapping[str, Resolved],
        spreads: Mapping[str, ScoreSpread | None] | None = None,
        pool: int = 0,
    ) -> None:
        self.chosen = chosen
        self.spreads = dict(spreads or {})
        self.pool = pool
        fitted = calibration_for(vector_tag)
        recency = fitted.coefficients.get("recency", 0.0) + chosen.recency
        self.calibration = msgspec.structs.replace(
            fitted, coefficients={**fitted.coefficients, "recency": recency}
        )
        intent = time_intent(text)
        self.intent = LATEST if intent == NONE and chosen.recency > 0 else intent
        self.times = {key: r.version.valid_from for key, r in resolved.items()}
        for found in lanes.values():
            for c in found:
                if c.doc is not None:
                    self.times.setdefault(c.key, c.doc.ts)

    def features(self, lanes: Mapping[str, Sequence[Candidate]]) -> dict[str, dict[str, float]]:
        """The calibrated fusion's features of every candidate (what `bench/fit_fusion.py` fits on)."""
        weights = self.chosen.weights
        hits = {lane: found for lane, found in lane_hits(lanes).items() if weights.get(lane, 0) > 0}
        return features(collect(hits, self.times), hits, self.intent, self.spreads, self.pool)

    def fuse(self, lanes: Mapping[str, Sequence[LaneHit]], limit: int | None = None) -> list[FusedHit]:
        if self.chosen.fusion != "calibrated":
            return fuse(lanes, self.chosen, limit)
        return fuse_calibrated(
            lanes,
            self.chosen,
            self.calibration,
            times=self.times,
            intent=self.intent,
            limit=limit,
            spreads=self.spreads,
            pool=self.pool,
        )


def lane_hits(lanes: Mapping[str, Sequence[Candidate]]) -> dict[str, list[LaneHit]]:
    return {
        lane: [LaneHit(key=c.key, score=c.score, completed=c.completed) for c in found]
        for lane, found in lanes.items()
    }
