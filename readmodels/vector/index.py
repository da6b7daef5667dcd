"""`VectorIndex`: approximate nearest neighbours (usearch HNSW) over 8-bit rows, re-ranked exactly.

The index keeps each vector once, as 8-bit integers scaled to its largest component, in chunks that never
move; the HNSW graph points into them (`copy=False`) instead of holding a copy of its own. That is 256
bytes a row at 256 dimensions (half precision took twice that, a float32 matrix four times).

A search proposes candidates by cosine (the vectors are unit length, so this is their inner product, and
cosine ignores each row's own scale): the HNSW graph's `oversample x k` best, or, when the filter (or the
whole index) leaves at most `EXACT_SCAN_ROWS` rows, the best of a scan of all of them. The caller's float32
rows of the candidates (`rows_of`: the read model keeps them on disk) then decide the order and the
scores, so what a search returns is exact: 8 bits move a score by ~2e-3, less than separates the k-th row
from the `oversample x k` candidates past it. The index is rebuilt from the read model's own storage at
open: it is a cache, never the truth.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable
from typing import Final

import numpy as np
import numpy.typing as npt


def _share_the_system_libstdcxx() -> None:
    """Load the system's libstdc++ into the process's global scope, before usearch's extension.

    That extension carries a static copy of libstdc++ whose locale ids (GNU "unique" symbols) become the
    whole process's when it loads first: a C++ library loaded after it against the system's libstdc++
    then crashes in its static initializers (onnxruntime, which the `minilm-onnx` embedders load, did:
    `import usearch; import onnxruntime` was a segmentation fault). With the system's copy global first,
    usearch binds those symbols to it, as an ordinary shared library would.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError):  # no system libstdc++ (a static or musl build): nothing to share
            ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)


_share_the_system_libstdcxx()

from usearch.index import Index  # noqa: E402  (after the function above has run)

from readmodels.vector.embedders import Vectors  # noqa: E402

OVERSAMPLE: Final = 8
MIN_CANDIDATES: Final = 64
EXACT_SCAN_ROWS: Final = 25_000
"""Up to this many eligible rows, a scan (a few ms) beats the graph and misses nothing."""
CONNECTIVITY: Final = 16
EXPANSION_ADD: Final = 128
EXPANSION_SEARCH: Final = 256
CHUNK_ROWS: Final = 16_384
SPREAD_SAMPLE: Final = 8_192
"""The rows a spread is measured on at most (evenly spaced): a mean and a deviation need no more."""
"""Rows per chunk of 8-bit vectors (4 MiB at 256 dimensions): chunks are only ever added, so the addresses
the graph holds stay valid."""
LEVELS: Final = 127
"""An 8-bit row holds its vector times `LEVELS / (its largest component)`."""
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
        self._chunks: list[npt.NDArray[np.int8]] = []
        self._steps: list[npt.NDArray[np.float32]] = []  # per row: the value of one level, to score scans
        self._count = 0
        self._ann = Index(
            ndim=dimensions,
            metric="cos",
            dtype="i8",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    def __len__(self) -> int:
        return self._count

    def add(self, vectors: Vectors) -> None:
        """Append rows; the graph references their 8-bit copies in place."""
        done = 0
        while done < len(vectors):
            at = self._count % CHUNK_ROWS
            if at == 0:
                self._chunks.append(np.zeros((CHUNK_ROWS, self.dimensions), dtype=np.int8))
                self._steps.append(np.zeros(CHUNK_ROWS, dtype=np.float32))
            take = min(len(vectors) - done, CHUNK_ROWS - at)
            placed = self._chunks[-1][at : at + take]
            placed[:], self._steps[-1][at : at + take] = quantized(vectors[done : done + take])
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

    def spread(self, query: Vectors, allowed: Mask | None = None) -> tuple[int, float, float]:
        """(rows among `allowed`, mean, standard deviation) of their approximate scores for `query`."""
        rows = np.arange(len(self)) if allowed is None else np.flatnonzero(allowed[: len(self)])
        if not len(rows):
            return 0, 0.0, 0.0
        sample = rows[:: max(1, len(rows) // SPREAD_SAMPLE)]
        scores = self._scores_of(query, sample).astype(np.float64)
        return len(rows), float(scores.mean()), float(scores.std())

    def _scanned(self, query: Vectors, wanted: int, allowed: Mask | None) -> Rows:
        if allowed is None:
            rows = np.arange(len(self))
            scores = np.concatenate([self._scores(query, n) for n in range(len(self._chunks))])
        else:
            rows = np.flatnonzero(allowed)
            scores = self._scores_of(query, rows)
        if len(rows) <= wanted:
            return rows
        return rows[np.argpartition(-scores, wanted - 1)[:wanted]]

    def _scores(self, query: Vectors, number: int) -> npt.NDArray[np.float32]:
        """Approximate scores of chunk `number`'s rows that hold vectors."""
        return self._chunk_scores(query, number, slice(min(CHUNK_ROWS, self._count - number * CHUNK_ROWS)))

    def _scores_of(self, query: Vectors, rows: Rows) -> npt.NDArray[np.float32]:
        """Approximate scores of `rows`, in that order."""
        chunk, at = np.divmod(rows, CHUNK_ROWS)
        out = np.empty(len(rows), dtype=np.float32)
        for number in np.unique(chunk):
            picked = chunk == number
            out[picked] = self._chunk_scores(query, int(number), at[picked])
        return out

    def _chunk_scores(self, query: Vectors, number: int, where: slice | Rows) -> npt.NDArray[np.float32]:
        """Approximate scores of chunk `number`'s rows at `where`: their levels times their step."""
        levels = self._chunks[number][where].astype(np.float32) @ query
        return levels * self._steps[number][where]


def quantized(vectors: Vectors) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """Each row as 8-bit levels of its largest component (a zero row stays zero), and one level's value."""
    largest = np.abs(vectors).max(axis=1)
    step = (largest / LEVELS).astype(np.float32)
    scale = np.divide(1.0, step, out=np.zeros_like(step), where=step > 0)
    levels = np.empty(vectors.shape, dtype=np.int8)
    for start in range(0, len(vectors), 1024):  # small temporaries: a whole store is quantized at open
        part = vectors[start : start + 1024] * scale[start : start + 1024, None]
        levels[start : start + 1024] = np.rint(part, out=part)
    return levels, step


def best(query: Vectors, rows: Rows, vectors: Vectors, limit: int) -> Scored:
    """The `limit` best of `rows` by the exact score of their `vectors` (ties: the lower row first)."""
    scores = vectors @ query
    if len(scores) > limit:
        top = np.argpartition(-scores, limit - 1)[:limit]
        order = top[np.lexsort((rows[top], -scores[top]))]
    else:
        order = np.lexsort((rows, -scores))
    return [(int(rows[i]), float(scores[i])) for i in order]
