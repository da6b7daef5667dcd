"""Words too common to search for: learned from the index itself, like stop words but for any language.

A word in more than `SHARE` of the documents (and in at least `MIN_DOCS`) gets little BM25 weight (an IDF
of at most ln 20 = 3.0, against about 9 for a word in one document of 10,000), yet FTS5 scores every
document it matches: "what do we know about X" would score half the index to rank X. Such words are left
out of the match, unless every word of the question is that common (then the rarest
`KEEP_WHEN_ALL_COMMON` stay). Document frequencies are probed with a capped count (it stops counting
past the threshold, so a probe of a very common word costs what a rare one does) and cached until the
index grows by `REFRESH_GROWTH`.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from typing import Final

SHARE: Final = 0.05
"""A larger share keeps more of the words that many conversations of one index use but that tell the
turns of one conversation apart ("project", "deploy"). Measured (docs/benchmarks.md): the default
profile's Recall@5 on the BEAM development set is 0.334 at 5%, 0.339 at 10%, 0.340 at 20%, while at
100,000 events the checkout's p95 is 157 ms at 10% (keyword lane median 38 ms, against 15 ms at 5%):
the 150 ms goal keeps 5%."""
MIN_DOCS: Final = 1000
KEEP_WHEN_ALL_COMMON: Final = 2
REFRESH_GROWTH: Final = 1.1
MAX_CACHED: Final = 50_000
COMMON: Final = sys.maxsize
"""The document frequency remembered for a word found in more than the threshold's documents."""


class CommonWords:
    def __init__(self) -> None:
        self._frequency: dict[str, int] = {}
        self._cached_at_docs = 0
        self._lock = threading.Lock()  # several reader threads share the cache

    def searchable(self, db: sqlite3.Connection, words: list[str]) -> list[str]:
        """`words` without the ones too common to be worth scoring (in the caller's reader thread)."""
        docs = int(db.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()[0])
        threshold = max(MIN_DOCS, int(SHARE * docs))
        if docs <= threshold or len(words) <= 1:
            return words
        with self._lock:
            if docs > self._cached_at_docs * REFRESH_GROWTH or len(self._frequency) > MAX_CACHED:
                self._frequency.clear()
                self._cached_at_docs = docs
        frequency = {word: self._document_frequency(db, word, threshold) for word in words}
        kept = [word for word in words if frequency[word] <= threshold]
        if kept:
            return kept
        return sorted(words, key=lambda word: frequency[word])[:KEEP_WHEN_ALL_COMMON]

    def _document_frequency(self, db: sqlite3.Connection, word: str, threshold: int) -> int:
        with self._lock:
            known = self._frequency.get(word)
        if known is not None:
            return known
        counted = int(
            db.execute(
                "SELECT count(*) FROM (SELECT 1 FROM docs_fts WHERE docs_fts MATCH ? LIMIT ?)",
                (f'"{word}"', threshold + 1),
            ).fetchone()[0]
        )
        if counted > threshold:
            # the count stopped at this threshold: remembered as such, it passed for rare as soon as one
            # more document raised the threshold, and every question scored it again (30 ms instead of 5)
            counted = COMMON
        with self._lock:
            self._frequency[word] = counted
        return counted
