"""Words too common to match on: learned from the index itself, like stop words but for any language.

FTS5 answers an OR of the question's words by scoring every document that any of them matches, so a word
in half the index made "what do we know about X" score half the index to rank X. A word in more than
`SHARE` of the documents (and in at least `MIN_DOCS`) is therefore not matched on, but it still scores:
the search matches the rarer words, then the same documents again with the common words required too,
`(rare) AND (common)`, which FTS5 answers by seeking in the common words' postings instead of scoring
every document in them, and each document keeps its better score. BM25 sums one independent part per
word, so that score is the document's BM25 over every word of the question: a document with a rare word
and a common one ranks above one with the rare word only, as it would with no cut.

A word in half the documents or more weighs nothing in FTS5's BM25 (its IDF, ln((N - n + 0.5) / (n +
0.5)), is at most 0, which FTS5 makes 1e-6): it is left out altogether, as it changes no score. What the
cut still gives up: a document matching common words only is not found (a common word adds at most
2.2 x ln 19 = 6.5 to a score, a rare one up to 2.2 x ln N), and FTS5 reads each scored common word's
postings once per question to count them for its IDF (a count, not a score per document). If every word
is common, the rarest `KEEP_WHEN_ALL_COMMON` are matched on and the others score the same way.

Document frequencies are probed with a capped count (it stops at half the documents, so a probe of the
most common word costs what one of a word in half the documents does) and cached until the index grows
by `REFRESH_GROWTH`.
"""

from __future__ import annotations

import sqlite3
import sys
import threading
from typing import Final, NamedTuple

SHARE: Final = 0.05
"""A larger share matches on more of the words that many conversations of one index use but that tell
the turns of one conversation apart ("project", "deploy"), at the cost of scoring every document they
match. Measured when common words were left out of the score as well as the match (docs/benchmarks.md):
the default profile's Recall@5 on the BEAM development set was 0.334 at 5%, 0.339 at 10%, 0.340 at 20%,
while at 100,000 events the checkout's p95 was 157 ms at 10% (keyword lane median 38 ms, against 15 ms at
5%): the 150 ms goal kept 5%."""
MIN_DOCS: Final = 1000
KEEP_WHEN_ALL_COMMON: Final = 2
REFRESH_GROWTH: Final = 1.1
MAX_CACHED: Final = 50_000
WEIGHTLESS: Final = sys.maxsize
"""The document frequency remembered for a word found in half the documents or more (where the count
stops): it must not pass for a word in a little less than half once the index grows."""


class Split(NamedTuple):
    """A question's words: those a document must match one of, and those that only add to its score."""

    matched: list[str]
    scored: list[str]


class CommonWords:
    def __init__(self) -> None:
        self._frequency: dict[str, int] = {}
        self._cached_at_docs = 0
        self._lock = threading.Lock()  # several reader threads share the cache

    def split(self, db: sqlite3.Connection, words: list[str]) -> Split:
        """`words` to match on, and the common ones to score only (in the caller's reader thread)."""
        docs = int(db.execute("SELECT coalesce(max(id), 0) FROM docs").fetchone()[0])
        threshold = max(MIN_DOCS, int(SHARE * docs))
        if docs <= threshold or len(words) <= 1:
            return Split(words, [])
        with self._lock:
            if docs > self._cached_at_docs * REFRESH_GROWTH or len(self._frequency) > MAX_CACHED:
                self._frequency.clear()
                self._cached_at_docs = docs
        half = (docs + 1) // 2  # n >= docs / 2: weightless
        frequency = {word: self._document_frequency(db, word, half) for word in words}
        matched = [word for word in words if frequency[word] <= threshold]
        if not matched:
            matched = sorted(words, key=lambda word: frequency[word])[:KEEP_WHEN_ALL_COMMON]
        scored = [word for word in words if word not in matched and frequency[word] < half]
        return Split(matched, scored)

    def _document_frequency(self, db: sqlite3.Connection, word: str, half: int) -> int:
        with self._lock:
            known = self._frequency.get(word)
        if known is not None:
            return known
        counted = int(
            db.execute(
                "SELECT count(*) FROM (SELECT 1 FROM docs_fts WHERE docs_fts MATCH ? LIMIT ?)",
                (f'"{word}"', half),
            ).fetchone()[0]
        )
        if counted >= half:
            # the count stopped here: remembered as such, it passed for less than half as soon as one more
            # document raised the half (a cut count passing for rare once cost every question 30 ms)
            counted = WEIGHTLESS
        with self._lock:
            self._frequency[word] = counted
        return counted
