"""The vector store's compact per-row bookkeeping: rows by document identity, and the filter arrays."""

from __future__ import annotations

import numpy as np

from readmodels.documents import DocKind, MemoryDoc
from readmodels.embedded.vector_filters import RowFilters
from readmodels.embedded.vector_rows import RowLookup


def doc(session: str, seq: int, ts: str, kind: DocKind = "turn", path: str | None = None) -> MemoryDoc:
    return MemoryDoc(
        session=session, seq=seq, event_hash="h", event_type="t", ts=ts, kind=kind, text="x", path=path
    )


def test_the_first_row_of_an_identity_wins_and_unknown_ones_have_none() -> None:
    lookup = RowLookup()
    assert lookup.rows([doc("a", 1, "t1")]) == [None]
    lookup.add([doc("a", 1, "t1"), doc("a", 2, "t2"), doc("a", 1, "t1")], first_row=0)
    lookup.add([doc("b", 1, "t3"), doc("a", 2, "t2"), doc("a", 2, "t2", path="p")], first_row=3)
    found = lookup.rows(
        [doc("a", 2, "t9"), doc("b", 1, "t3"), doc("a", 1, "t1"), doc("a", 2, "t2", path="p")]
    )
    assert found == [1, 3, 0, 5]  # the time is not part of the identity; the path is
    assert lookup.rows([doc("c", 1, "t1")]) == [None]


def test_filters_match_sessions_times_and_kinds_as_strings_compare() -> None:
    filters = RowFilters()
    filters.add([doc("a", 1, "2026-01-01T00:00:00Z"), doc("b", 1, "2026-01-02T00:00:00Z", kind="entity")])
    filters.add([doc("a", 2, "2026-01-03T00:00:00.123456Z")])  # longer: the array widens
    assert filters.mask(None, None, None) is None
    assert list(np.flatnonzero(filters.mask("a", None, None))) == [0, 2]  # type: ignore[arg-type]
    assert list(np.flatnonzero(filters.mask("nobody", None, None))) == []  # type: ignore[arg-type]
    assert list(np.flatnonzero(filters.mask(None, "2026-01-02T00:00:00Z", None))) == [0, 1]  # type: ignore[arg-type]
    assert list(np.flatnonzero(filters.mask(None, "2026-01-03T00:00:00.2Z", ["turn", "nope"]))) == [0, 2]  # type: ignore[arg-type]
