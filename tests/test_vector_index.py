"""`VectorIndex`: candidates from HNSW over 8-bit rows (or a scan under a selective filter),
re-ranked by the caller's exact rows."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from readmodels.vector.embedders import Vectors
from readmodels.vector.index import CHUNK_ROWS, LEVELS, Mask, Rows, Scored, VectorIndex, best, quantized


def unit_rows(count: int, dimensions: int, seed: int) -> Vectors:
    vectors: Vectors = np.random.default_rng(seed).standard_normal((count, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def exact(data: Vectors, query: Vectors, limit: int, allowed: Mask | None = None) -> Scored:
    """The true `limit` best rows: a float32 scan of every allowed row."""
    rows = np.arange(len(data)) if allowed is None else np.flatnonzero(allowed)
    return best(query, rows, data[rows], limit)


def rows_of(data: Vectors) -> Callable[[Rows], Vectors]:
    return lambda rows: data[rows]


def test_recall_against_exact_search_and_scores_are_exact() -> None:
    index = VectorIndex(64, exact_scan_rows=0)  # the graph, always
    data = unit_rows(5000, 64, seed=1)
    index.add(data[:3000])
    index.add(data[3000:])  # grows in batches, as commits arrive
    assert len(index) == 5000
    queries = unit_rows(50, 64, seed=2)
    found = 0
    for query in queries:
        approximate, reference = index.search(query, 10, rows_of(data)), exact(data, query, 10)
        found += len({row for row, _ in approximate} & {row for row, _ in reference})
        for row, score in approximate:
            assert np.isclose(score, float(data[row] @ query), rtol=0, atol=1e-6)  # float32 decides
        assert [s for _, s in approximate] == sorted((s for _, s in approximate), reverse=True)
    assert found / (10 * len(queries)) >= 0.95


def test_filters_are_honoured_and_a_selective_one_scans_exactly() -> None:
    index = VectorIndex(32, exact_scan_rows=100)
    data = unit_rows(2000, 32, seed=3)
    index.add(data)
    query = unit_rows(1, 32, seed=4)[0]
    scored = rows_of(data)
    half = np.arange(2000) % 2 == 0
    assert all(row % 2 == 0 for row, _ in index.search(query, 10, scored, half))
    few = np.zeros(2000, dtype=bool)
    few[[5, 17, 1999]] = True
    assert index.search(query, 10, scored, few) == exact(data, query, 10, few)
    assert {row for row, _ in index.search(query, 10, scored, few)} == {5, 17, 1999}
    assert index.search(query, 10, scored, np.zeros(2000, dtype=bool)) == []
    assert VectorIndex(8).search(np.ones(8, dtype=np.float32), 3, scored) == []


def test_a_scan_across_chunks_finds_what_a_float32_scan_finds() -> None:
    """Rows past the first chunk, added in batches that straddle chunk ends, are found and scored where
    they are; the 8-bit scan proposes what the exact scan ranks first."""
    data = unit_rows(CHUNK_ROWS + 3000, 16, seed=5)
    index = VectorIndex(16, exact_scan_rows=len(data))
    for start in range(0, len(data), 7000):
        index.add(data[start : start + 7000])
    assert len(index) == len(data)
    for query in unit_rows(20, 16, seed=6):
        found, reference = index.search(query, 10, rows_of(data)), exact(data, query, 10)
        assert [row for row, _ in found] == [row for row, _ in reference]
        assert np.allclose([s for _, s in found], [s for _, s in reference], rtol=0, atol=1e-6)
    late = np.zeros(len(data), dtype=bool)
    late[CHUNK_ROWS + 2990 :] = True
    query = data[CHUNK_ROWS + 2995]
    (row, score), *_ = index.search(query, 3, rows_of(data), late)
    assert row == CHUNK_ROWS + 2995 and np.isclose(score, 1.0, atol=1e-6)


def test_quantized_rows_keep_each_component_within_half_a_level() -> None:
    """Each row is scaled to its own largest component, so a row of small values loses no more than a
    row of large ones; a zero row (an embedder's empty text) stays zero instead of dividing by zero."""
    data = unit_rows(300, 48, seed=7)
    data[10] *= 1e-3
    data[11] = 0.0
    levels, steps = quantized(data)
    assert levels.dtype == np.int8 and steps.dtype == np.float32
    assert np.array_equal(np.abs(levels).max(axis=1)[[0, 10, 299]], [LEVELS] * 3)
    error = np.abs(levels.astype(np.float32) * steps[:, None] - data)
    assert np.all(error <= steps[:, None] / 2 + 1e-9)
    assert not levels[11].any() and steps[11] == 0.0
    index = VectorIndex(48, exact_scan_rows=len(data))
    index.add(data)
    assert 11 in {row for row, _ in index.search(data[11] + 1.0, 300, rows_of(data))}  # found, scored 0


def test_the_spread_of_scores_is_measured_on_the_allowed_rows_within_quantization() -> None:
    index = VectorIndex(32)
    data = unit_rows(20_000, 32, seed=5)
    index.add(data)
    query = unit_rows(1, 32, seed=6)[0]
    allowed = np.zeros(len(data), dtype=bool)
    allowed[:300] = True
    count, mean, std = index.spread(query, allowed)
    scores = data[:300] @ query
    assert count == 300
    assert abs(mean - float(scores.mean())) < 0.01 and abs(std - float(scores.std())) < 0.01
    count, mean, std = index.spread(query)  # every row: measured on an even sample
    assert count == 20_000 and abs(mean - float((data @ query).mean())) < 0.01
    assert index.spread(query, np.zeros(len(data), dtype=bool)) == (0, 0.0, 0.0)
