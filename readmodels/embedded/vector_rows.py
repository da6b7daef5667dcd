"""`RowLookup`: the row of a document by its identity, in 16 bytes a row.

A dict keyed by identity tuples kept each document's session, path and entity strings alive (~300 bytes a
row). This keeps a sorted array of 64-bit digests of the identities and the row of each instead. Two
identities sharing a digest (odds ~n²/2^65: one in a billion at 190,000 rows) would give the second the
first's row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from readmodels.documents import MemoryDoc, doc_identity

_encode = msgspec.msgpack.Encoder().encode


def digests(docs: Sequence[MemoryDoc]) -> npt.NDArray[np.uint64]:
    joined = b"".join(hashlib.blake2b(_encode(doc_identity(doc)), digest_size=8).digest() for doc in docs)
    return np.frombuffer(joined, dtype=np.uint64)


class RowLookup:
    """The first row added for each identity."""

    def __init__(self) -> None:
        self._keys: npt.NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self._rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def add(self, docs: Sequence[MemoryDoc], first_row: int) -> None:
        keys = digests(docs)
        unique, first = np.unique(keys, return_index=True)  # a batch may repeat an identity: its first wins
        known = self._find(unique) >= 0
        unique, rows = unique[~known], first[~known].astype(np.int64) + first_row
        at = np.searchsorted(self._keys, unique)
        self._keys = np.insert(self._keys, at, unique)
        self._rows = np.insert(self._rows, at, rows)

    def rows(self, docs: Sequence[MemoryDoc]) -> list[int | None]:
        found = self._find(digests(docs))
        return [None if row < 0 else int(row) for row in found]

    def _find(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        if not len(self._keys):
            return np.full(len(keys), -1, dtype=np.int64)
        at = np.searchsorted(self._keys, keys)
        inside = at < len(self._keys)
        hit = np.zeros(len(keys), dtype=bool)
        hit[inside] = self._keys[at[inside]] == keys[inside]
        return np.where(hit, self._rows[np.minimum(at, len(self._rows) - 1)], -1)
