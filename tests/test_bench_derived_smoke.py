"""bench/derived.py runs from a clean checkout, on LadybugDB, at a tiny size, and keeps the trust boundary."""

from __future__ import annotations

import pytest

from tests.test_bench_smoke import run_bench

KEYS = (
    "causal_recall_successors",
    "causal_recall_predecessors",
    "stale_causal_rejected",
    "citation_fidelity",
    "entity_resolution_precision",
    "entity_resolution_recall",
    "pending_candidates_as_facts",
    "candidates",
    "causal_edges",
    "same_as_proposed",
    "seconds",
    "backends",
    "machine",
)


@pytest.mark.slow
def test_derived_benchmark_reports_every_key_with_faithful_citations_and_no_candidate_as_fact() -> None:
    report = run_bench(
        "derived.py", "--sessions", "4", "--backend", "ladybug", "--embedder", "hash", timeout=120
    )
    assert set(KEYS) <= set(report)
    backends = report["backends"]
    assert isinstance(backends, dict) and set(backends) == {"ladybug"}
    assert report["citation_fidelity"] == 1.0
    assert report["pending_candidates_as_facts"] == 0
    ladybug = backends["ladybug"]
    assert ladybug["candidates"] > 0 and ladybug["causal_edges"] > 0 and ladybug["same_as_proposed"] > 0
    assert ladybug["checkouts"]["checkouts"] == ladybug["candidates"]
    assert ladybug["checkouts"]["promoted_among_facts"] > 0  # the control: facts are there to be seen
    assert ladybug["dead_letters"] == 0
    for key in KEYS[:6]:
        value = report[key]
        assert value is None or 0.0 <= value <= 1.0, key  # type: ignore[operator]
