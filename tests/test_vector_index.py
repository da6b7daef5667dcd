"""`VectorIndex`: HNSW candidates re-ranked exactly, exact scans under selective filters."""

from __future__ import annotations

import numpy as np

from readmodels.vector.embedders import Vectors
from readmodels.vector.index import VectorIndex


def unit_rows(count: int, dimensions: int, seed: int) -> Vectors:
    vectors: Vectors = np.random.default_rng(seed).standard_normal((count, dimensions)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def test_recall_against_exact_search_and_scores_are_exact() -> None:
    index = VectorIndex(64, exact_scan_rows=0)  # the graph, always
    data = unit_rows(5000, 64, seed=1)
    index.add(data[:3000])
    index.add(data[3000:])  # grows in batches, as commits arrive
    assert len(index) == 5000
    queries = unit_rows(50, 64, seed=2)
    found = 0
    for query in queries:
        approximate, exact = index.search(query, 10), index.exact(query, 10)
        found += len({row for row, _ in approximate} & {row for row, _ in exact})
        for row, score in approximate:
            assert np.isclose(score, float(data[row] @ query), atol=1e-5)
        assert [s for _, s in approximate] == sorted((s for _, s in approximate), reverse=True)
    assert found / (10 * len(queries)) >= 0.95


def test_filters_are_honoured_and_a_selective_one_scans_exactly() -> None:
    index = VectorIndex(32, exact_scan_rows=100)
    data = unit_rows(2000, 32, seed=3)
    index.add(data)
    query = unit_rows(1, 32, seed=4)[0]
    half = np.arange(2000) % 2 == 0
    assert all(row % 2 == 0 for row, _ in index.search(query, 10, half))
    few = np.zeros(2000, dtype=bool)
    few[[5, 17, 1999]] = True
    assert index.search(query, 10, few) == index.exact(query, 10, few)
    assert {row for row, _ in index.search(query, 10, few)} == {5, 17, 1999}
    assert index.search(query, 10, np.zeros(2000, dtype=bool)) == []
    assert VectorIndex(8).search(np.ones(8, dtype=np.float32), 3) == []
