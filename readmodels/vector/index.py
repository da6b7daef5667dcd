"""`VectorIndex`: approximate nearest neighbours (usearch HNSW) with an exact re-rank.

The HNSW graph proposes `oversample x k` candidates by inner product (the vectors are unit length, so this
is cosine); their exact scores against the stored vectors decide the order. When the filter (or the whole
index) leaves at most `EXACT_SCAN_ROWS` rows, scanning them exactly is as fast and has perfect recall, so
that is what happens; a filter that keeps more has its candidates oversampled by its selectivity. The
index is rebuilt from the read model's own storage at open: it is a cache, never the truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import numpy.typing as npt
from usearch.index import Index

from readmodels.vector.embedders import Vectors

OVERSAMPLE: Final = 8
MIN_CANDIDATES: Final = 64
EXACT_SCAN_ROWS: Final = 25_000
"""Up to this many eligible rows, an exact scan (a few ms) beats the graph and has perfect recall."""
CONNECTIVITY: Final = 16
EXPANSION_ADD: Final = 128
EXPANSION_SEARCH: Final = 256
ANN_DTYPE: Final = "f16"
"""The graph's own copy of each vector only proposes candidates (the float32 rows re-rank them exactly):
half precision halves that copy and barely moves which rows are proposed."""
Mask = npt.NDArray[np.bool_]
Scored = list[tuple[int, float]]
"""(row, exact score) pairs, best first."""


class VectorIndex:
    """Rows 0..n-1 of unit vectors; `search` returns (row, exact score) pairs, best first."""

    def __init__(self, dimensions: int, *, exact_scan_rows: int = EXACT_SCAN_ROWS) -> None:
        self.dimensions = dimensions
        self.exact_scan_rows = exact_scan_rows
        self._buffer: Vectors = np.zeros((1024, dimensions), dtype=np.float32)
        self._count = 0
        self._ann = Index(
            ndim=dimensions,
            metric="ip",
            dtype=ANN_DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def __len__(self) -> int:
        return self._count

    @property
    def _matrix(self) -> Vectors:
        return self._buffer[: self._count]

    def add(self, vectors: Vectors) -> None:
        if not len(vectors):
            return
        start, end = self._count, self._count + len(vectors)
        if end > len(self._buffer):  # grow by doubling: appending stays linear overall
            grown = np.zeros((max(end, 2 * len(self._buffer)), self.dimensions), dtype=np.float32)
            grown[:start] = self._buffer[:start]
            self._buffer = grown
        self._ann.add(np.arange(start, end, dtype=np.uint64), vectors)
        self._buffer[start:end] = vectors
        self._count = end

    def search(self, query: Vectors, limit: int, allowed: Mask | None = None) -> Scored:
        """The `limit` best rows among `allowed` (all rows when None)."""
        if limit <= 0 or not len(self):
            return []
        eligible = len(self) if allowed is None else int(allowed.sum())
        if eligible <= self.exact_scan_rows:
            return self.exact(query, limit, allowed)
        wanted = max(limit * OVERSAMPLE, MIN_CANDIDATES) * len(self) // eligible
        found = self._ann.search(query, min(wanted, len(self))).keys.astype(np.int64)
        rows = found if allowed is None else found[allowed[found]]
        if len(rows) < limit:  # the filter pruned nearly every candidate: scan what it allows
            return self.exact(query, limit, allowed)
        return _best(self._matrix[rows] @ query, rows, limit)

    def scores(self, query: Vectors, rows: Sequence[int]) -> list[float]:
        """The exact score of each given row."""
        picked = np.asarray(rows, dtype=np.int64)
        return [float(score) for score in self._matrix[picked] @ query]

    def exact(self, query: Vectors, limit: int, allowed: Mask | None = None) -> Scored:
        """The true `limit` best rows (a full scan): the reference for recall."""
        if limit <= 0 or not len(self):
            return []
        if allowed is None:
            return _best(self._matrix @ query, np.arange(len(self)), limit)
        rows = np.flatnonzero(allowed)
        return _best(self._matrix[rows] @ query, rows, limit)


def _best(
    scores: npt.NDArray[np.float32], rows: npt.NDArray[np.int64], limit: int
) -> list[tuple[int, float]]:
    if len(scores) > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
        order = top[np.lexsort((rows[top], -scores[top]))]
    else:
        order = np.lexsort((rows, -scores))
    return [(int(rows[i]), float(scores[i])) for i in order]
