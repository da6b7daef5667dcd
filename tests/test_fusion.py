"""Fusion of ranked lanes: reciprocal rank fusion and normalized score fusion, explained hit by hit."""

from __future__ import annotations

import math

import pytest

from readmodels.documents import ScoreSpread
from readmodels.retrieval.calibrated import Calibration, collect, features, fuse_calibrated
from readmodels.retrieval.fusion import PROFILES, RRF_K, LaneHit, Profile, fuse, profile
from readmodels.retrieval.temporal import EARLIEST, LATEST, NONE, time_intent


def hits(*pairs: tuple[str, float]) -> list[LaneHit]:
    return [LaneHit(key=key, score=score) for key, score in pairs]


LANES = {
    "keyword": hits(("auth", 12.0), ("db", 3.0), ("login", 2.5)),
    "vector": hits(("login", 0.91), ("auth", 0.40)),
    "exact": hits(("db", 1.0)),
}


def test_rrf_adds_weighted_reciprocal_ranks_and_explains_them() -> None:
    chosen = Profile(name="t", fusion="rrf", weights={"keyword": 1.0, "vector": 1.0, "exact": 2.0})
    fused = fuse(LANES, chosen)
    by_key = {hit.key: hit for hit in fused}
    assert by_key["auth"].score == pytest.approx(1 / (RRF_K + 1) + 1 / (RRF_K + 2))
    assert by_key["db"].score == pytest.approx(1 / (RRF_K + 2) + 2 / (RRF_K + 1))
    assert [hit.key for hit in fused] == ["db", "auth", "login"]
    for hit in fused:
        assert hit.score == pytest.approx(sum(c.contribution for c in hit.lanes.values()))
    assert by_key["login"].lanes["vector"].rank == 0 and by_key["login"].lanes["keyword"].raw == 2.5


def test_score_fusion_normalizes_each_lane_so_no_scale_dominates() -> None:
    chosen = Profile(name="t", fusion="score", weights={"keyword": 1.0, "vector": 1.0})
    by_key = {hit.key: hit for hit in fuse(LANES, chosen)}
    assert by_key["auth"].lanes["keyword"].contribution == pytest.approx(1.0)  # BM25 12 is the lane's best
    assert by_key["auth"].lanes["vector"].contribution == pytest.approx(0.0)
    assert by_key["login"].score == pytest.approx((2.5 - 2.5) / (12 - 2.5) + 1.0)


def test_zero_weights_drop_a_lane_duplicates_count_once_and_ties_are_stable() -> None:
    chosen = Profile(name="t", fusion="rrf", weights={"keyword": 1.0})
    assert [hit.key for hit in fuse(LANES, chosen)] == ["auth", "db", "login"]
    twice = {"keyword": hits(("a", 1.0), ("a", 0.5)), "vector": hits(("b", 1.0))}
    fused = fuse(twice, Profile(name="t", fusion="rrf", weights={"keyword": 1.0, "vector": 1.0}))
    assert [(hit.key, hit.lanes[next(iter(hit.lanes))].rank) for hit in fused] == [("a", 0), ("b", 0)]
    assert fuse({}, PROFILES["balanced"]) == []
    assert len(fuse(LANES, PROFILES["balanced"], limit=2)) == 2


def test_profiles_are_named_and_unknown_ones_are_refused() -> None:
    assert set(PROFILES) == {"balanced", "precision", "recall", "temporal"}
    assert profile("balanced").fusion == "calibrated"
    assert profile("recall").fusion == "rrf"
    with pytest.raises(ValueError, match="profile: expected one of"):
        profile("fastest")


def test_time_intent_reads_whole_words_and_conflicting_cues_cancel() -> None:
    assert time_intent("What is the memory usage of Redis now?") == LATEST
    assert time_intent("Which database do we currently use?") == LATEST
    assert time_intent("What did I first plan for the launch?") == EARLIEST
    assert time_intent("What is the launch date?") == NONE
    assert time_intent("Did the first plan still hold?") == NONE  # both kinds: no intent
    assert time_intent("a snowstorm knows nothing") == NONE  # "now" inside a word is no cue


def test_calibrated_fusion_is_a_probability_explained_by_its_parts() -> None:
    chosen = Profile(name="t", fusion="calibrated", weights={"keyword": 1.0, "vector": 1.0, "exact": 1.0})
    calibration = Calibration(
        vector_space="t", bias=-2.0, coefficients={"keyword_gated": 1.0, "vector_gated": 1.0, "exact": 3.0}
    )
    fused = fuse_calibrated(LANES, chosen, calibration)
    by_key = {hit.key: hit for hit in fused}
    # "db" is named in the question (exact); "auth" is BM25's outlier and vector's second
    assert [hit.key for hit in fused][:2] == ["db", "auth"]
    for hit in fused:
        logit = hit.base + sum(c.contribution for c in hit.lanes.values())
        assert 0 < hit.score < 1 and hit.score == pytest.approx(1 / (1 + math.exp(-logit)))
    assert by_key["db"].lanes["exact"].contribution == pytest.approx(3.0)
    alone = fuse_calibrated({"vector": LANES["vector"]}, chosen, calibration)
    assert [hit.key for hit in alone] == ["login", "auth"]  # one lane keeps its own order


def test_recency_orders_equal_evidence_by_the_questions_time_intent() -> None:
    chosen = Profile(name="t", fusion="calibrated", weights={"keyword": 1.0, "vector": 1.0})
    calibration = Calibration(vector_space="t", bias=0.0, coefficients={"keyword_gated": 1.0, "recency": 1.0})
    times = {"old": "2026-01-01T00:00:00.000000Z", "new": "2026-06-01T00:00:00.000000Z"}
    both = {"keyword": hits(("old", 5.0), ("new", 5.0)), "vector": hits(("old", 0.5), ("new", 0.5))}
    newest = fuse_calibrated(both, chosen, calibration, times=times, intent=LATEST)
    oldest = fuse_calibrated(both, chosen, calibration, times=times, intent=EARLIEST)
    assert [h.key for h in newest] == ["new", "old"] and [h.key for h in oldest] == ["old", "new"]
    assert newest[0].base > newest[1].base  # recency is no lane's: it is in base


def test_gated_fusion_follows_the_lane_whose_best_stand_out_for_this_question() -> None:
    chosen = Profile(name="t", fusion="calibrated", weights={"keyword": 1.0, "vector": 1.0})
    calibration = Calibration(
        vector_space="t", bias=-3.0, coefficients={"keyword_gated": 1.0, "vector_gated": 1.0}
    )
    # BM25 finds one document far above the rest of the scope; the vectors are nearly flat
    spreads = {
        "keyword": ScoreSpread(documents=100, mean=0.5, std=1.0),
        "vector": ScoreSpread(documents=100, mean=0.30, std=0.10),
    }
    lanes = {
        "keyword": hits(("said-it", 9.0), ("other", 1.0)),
        "vector": hits(("other", 0.36), ("said-it", 0.34)),
    }
    fused = fuse_calibrated(lanes, chosen, calibration, spreads=spreads)
    assert [hit.key for hit in fused] == ["said-it", "other"]
    # the same lanes, but now the vectors' best is the outlier and BM25 is flat: the vectors lead
    spreads["vector"] = ScoreSpread(documents=100, mean=0.10, std=0.05)
    spreads["keyword"] = ScoreSpread(documents=100, mean=8.0, std=2.0)
    lanes["vector"] = hits(("other", 0.60), ("said-it", 0.12))
    fused = fuse_calibrated(lanes, chosen, calibration, spreads=spreads)
    assert [hit.key for hit in fused] == ["other", "said-it"]
    for hit in fused:  # explained: each lane's gated part, the bias in base
        logit = hit.base + sum(c.contribution for c in hit.lanes.values())
        assert hit.score == pytest.approx(1 / (1 + math.exp(-logit)))
        assert hit.base == pytest.approx(-3.0)


def test_gated_fusion_estimates_a_spread_no_store_gave_and_scores_a_missing_document_low() -> None:
    values = features(
        collect({"keyword": hits(("a", 6.0), ("b", 2.0), ("c", 1.0)), "vector": hits(("b", 0.5))}, {}),
        {"keyword": hits(("a", 6.0), ("b", 2.0), ("c", 1.0)), "vector": hits(("b", 0.5))},
        NONE,
        spreads={},
        pool=50,
    )
    # the keyword lane's own three scores make its spread; the vector lane has one score: no spread
    assert values["a"]["keyword_gated"] > values["b"]["keyword_gated"] > values["c"]["keyword_gated"]
    assert values["a"].get("vector_gated", 0.0) == 0.0
    full = features(
        collect({"keyword": hits(("a", 6.0)), "vector": hits(("a", 0.5), ("z", 0.4))}, {}),
        {"keyword": hits(("a", 6.0)), "vector": hits(("a", 0.5), ("z", 0.4))},
        NONE,
        spreads={"keyword": ScoreSpread(documents=10, mean=0.6, std=1.8)},
        pool=1,
    )
    # "z" was not returned by a keyword lane that filled its pool: it scores the lane's last (6.0)
    assert full["z"]["keyword_gated"] / full["a"]["keyword_gated"] == pytest.approx(1.0)
