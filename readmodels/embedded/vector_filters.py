"""`RowFilters`: each vector row's session, time and kind as compact arrays, so a filter is a few
vectorized comparisons and a row costs ~40 bytes here instead of three Python strings.

Sessions and kinds are small integer codes; times stay strings (compared as UTF-8 bytes, whose order is the
strings' order), so `as_of` means exactly what it means everywhere else: `ts <= as_of`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from readmodels.documents import DOC_KINDS, MemoryDoc
from readmodels.vector.index import Mask

_KIND_CODES = {kind: code for code, kind in enumerate(DOC_KINDS)}


class RowFilters:
    """Per-row session, time and kind, appended in row order."""

    def __init__(self) -> None:
        self._session_codes: dict[str, int] = {}
        self.sessions: npt.NDArray[np.int32] = np.zeros(0, dtype=np.int32)
        self.times: npt.NDArray[np.bytes_] = np.zeros(0, dtype="S1")
        self.kinds: npt.NDArray[np.int8] = np.zeros(0, dtype=np.int8)

    def add(self, docs: Sequence[MemoryDoc]) -> None:
        codes = self._session_codes
        sessions = [codes.setdefault(doc.session, len(codes)) for doc in docs]
        self.sessions = np.concatenate([self.sessions, np.array(sessions, dtype=np.int32)])
        times = np.array([doc.ts.encode() for doc in docs], dtype=np.bytes_)
        self.times = np.concatenate([self.times, times])  # widens to the longest time seen
        self.kinds = np.concatenate(
            [self.kinds, np.array([_KIND_CODES[d.kind] for d in docs], dtype=np.int8)]
        )

    def mask(self, session: str | None, as_of: str | None, kinds: Sequence[str] | None) -> Mask | None:
        if session is None and as_of is None and not kinds:
            return None
        allowed = np.ones(len(self.sessions), dtype=bool)
        if session is not None:
            allowed &= self.sessions == self._session_codes.get(session, -1)
        if as_of is not None:
            allowed &= self.times <= as_of.encode()
        if kinds:
            allowed &= np.isin(self.kinds, [_KIND_CODES[kind] for kind in kinds if kind in _KIND_CODES])
        return allowed
