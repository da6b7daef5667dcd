"""Turns that carry their context: a short transcript turn borrows words from the turns before it.

"yes, last Tuesday" alone cannot be found by what it answers. The keyword model indexes each turn with
its own text and, in a column of its own weighted below the text (`CONTEXT_WEIGHT`, so the turn counts
twice against what it borrows), the last words of the turns before it in its session, up to
`CONTEXT_WORDS` words in all: a turn of 20 words borrows 44, going back over several short turns if
needed; a turn of `CONTEXT_WORDS` words or more borrows nothing. Measured offline (FTS5, the product's
tokenizer): BM25 Recall@5 on LoCoMo-like conversations 0.510 -> 0.627, on long technical turns 0.323 ->
0.308. Previous turns only, so that a document never changes once written and an as-of search sees no
words from the future. The vector model embeds no context (it hurt vectors in the same measurement).

Pure: the stores give the texts of the turns they already hold (`StoredTurns`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from readmodels.documents import EventDocs, MemoryDoc

CONTEXT_WORDS: Final = 64
"""A turn's own words and its borrowed ones, at most."""
CONTEXT_TURNS: Final = 8
"""The latest turns before a turn that it may borrow from, at most (the same in one batch or several)."""

StoredTurns = Callable[[str, int], Sequence[str]]
"""(session, seq) -> the texts of the session's latest stored turns before `seq`, newest first (at least
`CONTEXT_TURNS` of them when there are that many)."""


def borrowed_context(text: str, earlier: Sequence[str]) -> str:
    """The last `CONTEXT_WORDS - len(words of text)` words of the `earlier` turns (newest first), in
    their order; words are what whitespace separates."""
    wanted = CONTEXT_WORDS - len(text.split())
    if wanted <= 0:
        return ""
    newest_first: list[list[str]] = []
    count = 0
    for turn in earlier:
        words = turn.split()
        newest_first.append(words[-(wanted - count) :] if words else [])
        count += len(newest_first[-1])
        if count >= wanted:
            break
    return " ".join(word for words in reversed(newest_first) for word in words)


def with_context(batch: Sequence[EventDocs], stored: StoredTurns) -> list[EventDocs]:
    """`batch` (in order) with the `context` of its turn documents filled: from the batch's own earlier
    turns of the session, then, the first time a session's turn needs words, from `stored` (asked at
    most once per session, for the turns before that one)."""
    recent: dict[str, list[str]] = {}  # per session: the latest turns' texts, newest first
    filled: list[EventDocs] = []
    for event in batch:
        if not any(doc.kind == "turn" for doc in event.docs):
            filled.append(event)
            continue
        docs: list[MemoryDoc] = []
        for doc in event.docs:
            if doc.kind != "turn":
                docs.append(doc)
                continue
            earlier = recent.get(doc.session)
            if earlier is None:
                needs = len(doc.text.split()) < CONTEXT_WORDS
                earlier = list(stored(doc.session, doc.seq))[:CONTEXT_TURNS] if needs else []
            # a turn of `CONTEXT_WORDS` words or more alone gives any later turn all it may borrow, so
            # not asking `stored` before it changes no context
            docs.append(msgspec.structs.replace(doc, context=borrowed_context(doc.text, earlier)))
            recent[doc.session] = [doc.text, *earlier][:CONTEXT_TURNS]
        filled.append(msgspec.structs.replace(event, docs=tuple(docs)))
    return filled
