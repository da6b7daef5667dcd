"""The query and retrieval benchmarks run from a clean checkout and print one JSON object (tiny sizes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(*args: str, timeout: float = 600) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, *args], cwd=BENCH, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert isinstance(report, dict)
    return report


@pytest.mark.slow
def test_query_benchmark_reports_latencies_and_baselines() -> None:
    report = run_bench(
        "query.py", "--sizes", "300,600", "--backends", "ladybug", "--queries", "8", "--warmup", "2"
    )
    ladybug = report["ladybug"]
    assert isinstance(ladybug, dict) and set(ladybug) == {"300", "600"}
    for size in ("300", "600"):
        measured = ladybug[size]
        for name in ("query_ms", "checkout_ms", "bm25_only_query_ms"):
            assert 0 < measured[name]["p50"] <= measured[name]["p95"] <= measured[name]["max"]
        assert set(measured["lane_median_ms"]) == {"exact", "keyword", "vector", "traversal", "verbatim"}
        assert measured["warnings"] == []
    assert report["raw_nats_request_reply_ms"]["p50"] > 0  # type: ignore[index]


@pytest.mark.slow
def test_retrieval_benchmark_scores_every_lane_and_profile_next_to_bm25_on_both_fixtures() -> None:
    report = run_bench("retrieval.py")
    datasets = report["datasets"]
    assert isinstance(datasets, list) and [d["format"] for d in datasets] == ["locomo", "longmemeval"]
    lanes = {f"lane:{lane}" for lane in ("exact", "keyword", "vector", "traversal", "verbatim")}
    for dataset in datasets:
        results = dataset["results"]
        assert {"bm25", "balanced", "precision", "recall", "temporal"} | lanes <= set(results)
        assert dataset["default_profile"] == "balanced" and dataset["embedder"] == "wordllama"
        for scores in results.values():
            turns = scores["turns"]
            overall = turns["overall"]
            assert 0 <= overall["recall"]["@1"] <= overall["recall"]["@5"] <= overall["recall"]["@10"] <= 1
            assert 0 <= overall["mrr"] <= 1 and 0 <= overall["ndcg10"] <= 1
            assert set(turns["top5_kind_share"]) == {"entity", "event", "source"}
            assert 0 < turns["latency_ms"]["p50"] <= turns["latency_ms"]["p95"]
        assert results["lane:keyword"]["turns"]["overall"] == results["bm25"]["turns"]["overall"]
        assert dataset["default_recall@5"] == results["balanced"]["turns"]["overall"]["recall"]["@5"]
        best = dataset["best_lane"]
        assert best in lanes and dataset["best_lane_recall@5"] == max(
            results[lane]["turns"]["overall"]["recall"]["@5"] for lane in lanes
        )
        abstention = dataset["abstention"]
        assert abstention["unanswerable"] >= 1 and 0 <= abstention["recall"] <= 1
    assert "sessions" in datasets[1]["results"]["bm25"]


@pytest.mark.slow
def test_mcp_benchmark_reports_stdio_and_http_next_to_the_raw_paths() -> None:
    report = run_bench("mcp_gateway.py", "--events", "200", "--calls", "5", "--warmup", "1")
    for call, raw in (("checkout_ms", "raw_query_service"), ("append_ms", "raw_event_log")):
        ways = report[call]
        assert isinstance(ways, dict) and set(ways) == {raw, "mcp_stdio", "mcp_http"}
        for way in ways.values():
            assert 0 < way["p50"] <= way["p95"] <= way["max"]
        assert ways["mcp_http"]["overhead_p50_ms"] == round(ways["mcp_http"]["p50"] - ways[raw]["p50"], 2)


@pytest.mark.slow
def test_projection_benchmark_reports_rates_freshness_and_a_profile_per_stage() -> None:
    report: dict[str, Any] = run_bench(
        "project.py",
        "--events",
        "800",
        "--batch",
        "40",
        "--freshness-seconds",
        "1",
        "--freshness-rate",
        "200",
    )
    for key in ("incremental_events_per_s", "rebuild_events_per_s", "append_rate_per_s"):
        assert report[key] > 0, key
    assert report["incremental_to_rebuild_ratio"] > 0 and report["rate_last_vs_first_10pct"] > 0
    assert 0 < report["freshness_s"]["p50"] <= report["freshness_s"]["p95"]
    incremental = report["incremental"]
    assert incremental["complete"] and incremental["events"] == 800
    for window in (incremental, incremental["first_10pct"], incremental["last_10pct"]):
        profile = window["profile_us_per_event"]
        assert {"fetch", "verify", "apply", "apply.extract", "apply.write.commit"} <= set(profile)
        assert window["rows_per_event"]["apply.write.rows.create Event"] == 1.0
    assert set(report["peak_rss_mb"]) == {"bench_projector", "node", "nats_server"}


@pytest.mark.slow
def test_claims_benchmark_reports_projection_translation_and_read_latencies() -> None:
    report: dict[str, Any] = run_bench(
        "claims.py", "--events", "200", "--backend", "ladybug", "--samples", "10", timeout=60
    )
    assert report["events"] == 200 and report["events_without_operations"] == 0
    assert set(report["event_types"]) == {
        "claims.observation.recorded",
        "claims.claim.asserted",
        "claims.claim.resolved",
        "claims.claim.accepted",
        "inference.edge.generated",
    }
    for key in ("projection_events_per_s", "translate_events_per_s", "incompatible_checks_per_s"):
        assert report[key] > 0, key
    for question in ("about", "basis", "contradictions", "view"):
        assert 0 < report[f"{question}_p50_ms"] <= report[f"{question}_p95_ms"], question
    ladybug = report["backends"]["ladybug"]
    assert ladybug["projection_events_per_s"] == report["projection_events_per_s"]
    assert ladybug["reads"]["view_nodes"] == 200 and max(ladybug["reads"]["basis_links_seen"]) >= 3


def test_cli_start_benchmark_reports_each_command_next_to_the_raw_interpreter() -> None:
    report: dict[str, Any] = run_bench("cli_start.py", "--runs", "1")
    assert set(report["seconds"]) == {
        "eventloom --help", "eventloom status", "eventloom tail --help", "eventloom memory query --help"
    }  # fmt: skip
    assert 0 < report["raw_python_start_s"]["p50"] < report["seconds"]["eventloom status"]["p50"]
    assert set(report["median_over_raw_s"]) == set(report["seconds"])


def test_known_hashes_benchmark_reports_the_shared_memory_below_one_copy_per_consumer() -> None:
    report = run_bench("known_hashes.py", "--events", "2000", "--consumers", "3")
    assert report["events"] == 2000 and report["consumers"] == 3
    each, shared = report["mb_one_each"], report["mb_shared"]
    assert isinstance(each, float) and isinstance(shared, float)
    assert 0 < shared < each / 2  # three copies against one


def test_checkpoint_benchmark_times_a_checkpoint_and_the_reads_it_runs_beside() -> None:
    report: dict[str, Any] = run_bench(
        "checkpoint.py", "--sizes", "400", "--commits", "3", "--per-commit", "2", "--synthetic-rows", "500"
    )
    point = report["sizes"]["400"]
    assert point["trickle_commits"] == 3 and point["checkpoint_s"] > 0
    assert 0 < point["commit_ms"]["p50"] <= point["commit_ms"]["max"]
    assert point["reads_ms"]["before"]["count"] > 0 and point["reads_ms"]["after"]["count"] > 0
    assert point["rel_rows"]["HAS_EVENT"] == 400 + 3 * 2  # every event, the trickle's included
    assert point["rel_rows"]["RELATES"] > 0
    assert set(report["synthetic_checkpoint_ms"]) == {"rows", "none", "int64_x8", "string_x8"}


def test_mcp_surface_benchmark_counts_each_toolsets_tools_and_tokens() -> None:
    report = run_bench("mcp_surface.py", timeout=120)
    toolsets = report["toolsets"]
    assert isinstance(toolsets, dict) and {"default", "review", "admin", "workflow", "claims"} <= set(
        toolsets
    )
    default = toolsets["default"]
    assert default["tools"] == len(default["names"]) <= 10
    assert default["tokens"] == -(-default["chars"] // 4) and default["tokens"] <= 3000
    assert report["tokenizer"] == "chars/4 of the compact JSON of tools/list"


@pytest.mark.slow
def test_read_your_writes_benchmark_reports_what_a_read_after_an_append_sees_and_waits() -> None:
    report = run_bench("read_your_writes.py", "--rounds", "5", "--baseline", "2")
    assert report["benchmark"] == "read_your_writes" and report["n"] == 5
    assert report["seen_fraction"] == 1.0 and report["lagging_count"] == 0
    assert 0 <= report["wait_ms_p50"] <= report["wait_ms_p95"]  # type: ignore[operator]
    assert report["without_after"]["n"] == 2  # type: ignore[index]
    assert {"machine", "date", "command"} <= report.keys()
