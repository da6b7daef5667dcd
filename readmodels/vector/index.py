"""`VectorIndex`: approximate nearest neighbours (usearch HNSW) over half-precision rows, re-ranked exactly.

The index keeps each vector once, in half precision, in chunks that never move; the HNSW graph points into
them (`copy=False`) instead of holding a copy of its own. That is ~0.65 KB a row at 256 dimensions, where
a float32 matrix beside the graph's own half-precision copy took ~1.7 KB.

A search proposes candidates by inner product (the vectors are unit length, so this is cosine): the HNSW
graph's `oversample x k` best, or, when the filter (or the whole index) leaves at most `EXACT_SCAN_ROWS`
rows, the best of a scan of all of them. The caller's float32 rows of the candidates (`rows_of`: the read
model keeps them on disk) then decide the order and the scores, so what a search returns is exact: half
precision moves a score by ~1e-4, far less than separates the k-th row from the candidates past it. The
index is rebuilt from the read model's own storage at open: it is a cache, never the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt
from usearch.index import Index

from readmodels.vector.embedders import Vectors

OVERSAMPLE: Final = 8
MIN_CANDIDATES: Final = 64
EXACT_SCAN_ROWS: Final = 25_000
"""Up to this many eligible rows, a scan (a few ms) beats the graph and misses nothing."""
CONNECTIVITY: Final = 16
EXPANSION_ADD: Final = 128
EXPANSION_SEARCH: Final = 256
CHUNK_ROWS: Final = 16_384
"""Rows per chunk of half-precision vectors (8 MiB at 256 dimensions): chunks are only ever added, so the
addresses the graph holds stay valid."""
Mask = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.int64]
RowsOf = Callable[[Rows], Vectors]
"""The exact (float32) vectors of the given rows, in that order."""
Scored = list[tuple[int, float]]
"""(row, exact score) pairs, best first."""


class VectorIndex:
    """Rows 0..n-1 of unit vectors; `search` returns (row, exact score) pairs, best first."""

    def __init__(self, dimensions: int, *, exact_scan_rows: int = EXACT_SCAN_ROWS) -> None:
        self.dimensions = dimensions
        self.exact_scan_rows = exact_scan_rows
        self._chunks: list[npt.NDArray[np.float16]] = []
        self._count = 0
        self._ann = Index(
            ndim=dimensions,
            metric="ip",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def __len__(self) -> int:
        return self._count

    def add(self, vectors: Vectors) -> None:
        """Append rows; the graph references their half-precision copies in place."""
        done = 0
        while done < len(vectors):
            at = self._count % CHUNK_ROWS
            if at == 0:
                self._chunks.append(np.zeros((CHUNK_ROWS, self.dimensions), dtype=np.float16))
            take = min(len(vectors) - done, CHUNK_ROWS - at)
            placed = self._chunks[-1][at : at + take]
            placed[:] = vectors[done : done + take]
            keys = np.arange(self._count, self._count + take, dtype=np.uint64)
            self._ann.add(keys, placed, copy=False)
            self._count += take
            done += take

    def search(self, query: Vectors, limit: int, rows_of: RowsOf, allowed: Mask | None = None) -> Scored:
        """The `limit` best rows among `allowed` (all rows when None), scored exactly by `rows_of`."""
        rows = self.candidates(query, limit, allowed)
        if not len(rows):
            return []
        return best(query, rows, rows_of(rows), limit)

    def candidates(self, query: Vectors, limit: int, allowed: Mask | None = None) -> Rows:
        """At most `max(limit x OVERSAMPLE, MIN_CANDIDATES)` rows among `allowed`, the likeliest best."""
        if limit <= 0 or not len(self):
            return np.zeros(0, dtype=np.int64)
        wanted = max(limit * OVERSAMPLE, MIN_CANDIDATES)
        eligible = len(self) if allowed is None else int(allowed.sum())
        if eligible <= self.exact_scan_rows:
            return self._scanned(query, wanted, allowed)
        proposed = min(wanted * len(self) // eligible, len(self))
        found = self._ann.search(query, proposed).keys.astype(np.int64)
        rows = found if allowed is None else found[allowed[found]]
        if len(rows) < limit:  # the filter pruned nearly every candidate: scan what it allows
            return self._scanned(query, wanted, allowed)
        return rows[:wanted]

    def _scanned(self, query: Vectors, wanted: int, allowed: Mask | None) -> Rows:
        if allowed is None:
            rows = np.arange(len(self))
            scores = np.concatenate(
                [self._filled(n).astype(np.float32) @ query for n in range(len(self._chunks))]
            )
        else:
            rows = np.flatnonzero(allowed)
            scores = self._half(rows).astype(np.float32) @ query
        if len(rows) <= wanted:
            return rows
        return rows[np.argpartition(-scores, wanted - 1)[:wanted]]

    def _filled(self, number: int) -> npt.NDArray[np.float16]:
        """Chunk `number`'s rows that hold vectors."""
        return self._chunks[number][: min(CHUNK_ROWS, self._count - number * CHUNK_ROWS)]

    def _half(self, rows: Rows) -> npt.NDArray[np.float16]:
        """The half-precision vectors of `rows`."""
        chunk, at = np.divmod(rows, CHUNK_ROWS)
        out = np.empty((len(rows), self.dimensions), dtype=np.float16)
        for number in np.unique(chunk):
            picked = chunk == number
            out[picked] = self._chunks[int(number)][at[picked]]
        return out


def best(query: Vectors, rows: Rows, vectors: Vectors, limit: int) -> Scored:
    """The `limit` best of `rows` by the exact score of their `vectors` (ties: the lower row first)."""
    scores = vectors @ query
    if len(scores) > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
        order = top[np.lexsort((rows[top], -scores[top]))]
    else:
        order = np.lexsort((rows, -scores))
    return [(int(rows[i]), float(scores[i])) for i in order]
