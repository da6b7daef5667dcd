"""Who writes a candidate's title and summary: `SummaryWriter`, and the deterministic extractive default.

A writer only ever gets text and returns text: the citations are fixed before it is asked, so no writer
(an LLM included) can change what a candidate rests on.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol

from projectors.producers.consolidation.text import headline, topic_words

EXTRACTIVE: Final = "extractive"
SUMMARY_SENTENCES: Final = 3


@dataclass(frozen=True)
class Summary:
    title: str
    summary: str
    summary_by: str = EXTRACTIVE


@dataclass(frozen=True)
class SummaryRequest:
    """What a writer may read: the kind of candidate, its source texts in order, the extractive draft."""

    candidate_type: Literal["episode", "claim", "procedure"]
    texts: tuple[str, ...]
    draft: Summary


class SummaryWriter(Protocol):
    """Writes a title and a summary for a candidate; must return the draft rather than fail."""

    async def write(self, request: SummaryRequest) -> Summary: ...


class ExtractiveSummaries:
    """The default: the producer's own extractive draft, unchanged (deterministic, no I/O)."""

    async def write(self, request: SummaryRequest) -> Summary:
        return request.draft


def centrality(texts: Sequence[str]) -> list[float]:
    """Each text's sum of cosine similarities (of word sets) with the others: how much it shares."""
    bags = [topic_words(text) for text in texts]
    return [sum(_cosine(bag, other) for j, other in enumerate(bags) if j != i) for i, bag in enumerate(bags)]


def ranked_by_centrality(texts: Sequence[str]) -> list[int]:
    """Indices of the non-empty texts, most central first; ties go to the earlier text (deterministic)."""
    scores = centrality(texts)
    return sorted((i for i, text in enumerate(texts) if text.strip()), key=lambda i: (-scores[i], i))


def extractive(texts: Sequence[str], fallback_title: str) -> Summary:
    """Title: the headline of the most central text; summary: the most central texts, in their order."""
    ranked = ranked_by_centrality(texts)
    title = headline(texts[ranked[0]]) if ranked else ""
    summary = "\n".join(texts[i].strip() for i in sorted(ranked[:SUMMARY_SENTENCES]))
    return Summary(title=title or fallback_title, summary=summary or fallback_title)


def _cosine(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))
