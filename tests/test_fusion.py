"""Fusion of ranked lanes: reciprocal rank fusion and normalized score fusion, explained hit by hit."""

from __future__ import annotations

import pytest

from readmodels.retrieval.fusion import PROFILES, RRF_K, LaneHit, Profile, fuse, profile


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
