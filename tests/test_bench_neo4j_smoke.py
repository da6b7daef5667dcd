"""The Neo4j benchmarks run from a clean checkout and print the keys issue 19 asks for (tiny sizes)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from readmodels.neo4j.local import docker_answers, missing_tools
from tests.test_bench_smoke import run_bench

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("NEO4J_URI") and missing_tools() is not None and not docker_answers(),
        reason="NEO4J TESTS SKIPPED: no NEO4J_URI, no Docker engine, no java and mvn",
    ),
]


def test_rebuild_benchmark_reports_seconds_rows_per_event_and_the_ratio_to_the_import_tool() -> None:
    report: dict[str, Any] = run_bench("rebuild_neo4j.py", "--events", "400")
    assert report["events_replayed"] == 400 and report["seconds"] > 0
    assert report["rows_per_event"] == report["graph"]["rows_per_event"] > 4
    if report["neo4j"]["source"] == "local":
        assert report["ratio"] > 0 and report["anchor"]["seconds"] > 0 and report["anchor_rows_match"]
    else:
        assert report["ratio"] is None and report["anchor_unavailable"]
    assert {"Event", "RELATES", "schema:build"} <= set(report["load_seconds"])


def test_partitions_benchmark_reports_the_rate_with_one_and_two_workers() -> None:
    report: dict[str, Any] = run_bench("partitions.py", "--events", "400", "--sessions", "8")
    assert report["workers_1_events_per_s"] > 0 and report["workers_2_events_per_s"] > 0
    assert report["speedup"] > 0
    assert sum(report["workers_2"]["sessions_per_worker"]) == 8
