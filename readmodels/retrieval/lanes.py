"""The lanes of retrieval: each finds candidates its own way and ranks them by its own score.

- `exact`: entities whose name is the question or a phrase in it (graph, ignoring case);
- `keyword`: BM25 over every memory document (the keyword read model);
- `vector`: cosine similarity over every memory document (the vector read model);
- `verbatim`: BM25 over source text only (document and code chunks, with their lines), so the passage
  itself can be quoted;
- `traversal`: entities connected to the best entities found so far (see `readmodels.retrieval.traversal`).

A candidate's `key` says what it is about: hits on the same entity (any of its documents), event or
source span from different lanes are one result after fusion.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from readmodels.documents import DocKind, MemoryDoc
from readmodels.graph.identity import entity_key
from readmodels.graph.lookup import keys_by_name
from readmodels.graph.records import Neighbour
from readmodels.retrieval.protocol import DocumentSearch, GraphReads

VERBATIM_KINDS: Final[tuple[DocKind, ...]] = ("source", "code")
MAX_NAME_WORDS: Final = 6
MAX_NAMES: Final = 256
VECTOR_MIN_SCORE: Final = 0.05
"""Cosine at or below this is no similarity at all (unrelated texts hover around 0): not a candidate."""
_TOKEN: Final = re.compile("[^\\s\"'`\u201c\u201d\u2018\u2019()\\[\\]{}<>,;:!?]+")
_EDGE_PUNCTUATION: Final = ".-_/#@*"


@dataclass(frozen=True)
class Candidate:
    """What a lane found: a key, the lane's raw score, and what the key stands for."""

    key: str
    score: float
    doc: MemoryDoc | None = None
    neighbour: Neighbour | None = None
    completed: bool = False
    """Scored by the lane on request, not returned by its search (see `Retriever._complete`)."""


@dataclass
class LaneOutcome:
    candidates: list[Candidate] = field(default_factory=list)
    error: str | None = None
    ms: float = 0.0


ENTITY_PREFIX: Final = "entity:"


def entity_candidate_key(session: str, name: str, entity_type: str) -> str:
    return ENTITY_PREFIX + entity_key(session, name, entity_type)


def doc_key(doc: MemoryDoc) -> str:
    """Entity documents stand for their entity; source chunks for their span; the rest for their event."""
    if doc.kind == "entity" and doc.entity_name is not None and doc.entity_type is not None:
        return entity_candidate_key(doc.session, doc.entity_name, doc.entity_type)
    if doc.kind in VERBATIM_KINDS and doc.path is not None:
        return f"source:{doc.session}/{doc.seq}/{doc.path}:{doc.line_start or 0}-{doc.line_end or 0}"
    return f"event:{doc.session}/{doc.seq}"


def name_phrases(text: str) -> list[str]:
    """Every run of up to `MAX_NAME_WORDS` words of `text` (and `text` itself), lower-cased, deduplicated.

    Entity names are matched whole, so a name is found wherever it appears in the question.
    """
    words = [word.strip(_EDGE_PUNCTUATION) or word for word in _TOKEN.findall(text)]
    phrases: dict[str, None] = {text.strip().lower(): None}
    for size in range(1, MAX_NAME_WORDS + 1):
        for start in range(len(words) - size + 1):
            phrases[" ".join(words[start : start + size]).lower()] = None
            if len(phrases) >= MAX_NAMES:
                return list(phrases)
    return list(phrases)


class ExactLane:
    name = "exact"

    def __init__(self, graph: GraphReads) -> None:
        self.graph = graph

    async def search(self, text: str, session: str | None, as_of: str | None, limit: int) -> list[Candidate]:
        """Every entity so named; `Retriever` resolves each to its version at `as_of`."""
        named = await self.graph.read(keys_by_name(name_phrases(text), session))
        found = [
            # a longer name matched is a more specific match
            Candidate(key=ENTITY_PREFIX + entity.key, score=float(len(entity.name.split())))
            for entity in named
        ]
        found.sort(key=lambda c: (-c.score, c.key))
        return found


class DocumentLane:
    """A lane over a document search (keyword or vector), optionally restricted to some kinds."""

    def __init__(
        self,
        name: str,
        search: DocumentSearch,
        kinds: Sequence[DocKind] | None = None,
        min_score: float | None = None,
    ) -> None:
        self.name = name
        self._search = search
        self._kinds = kinds
        self._min_score = min_score

    async def search(self, text: str, session: str | None, as_of: str | None, limit: int) -> list[Candidate]:
        hits = await self._search.search(text, session=session, as_of=as_of, kinds=self._kinds, limit=limit)
        floor = self._min_score
        return [
            Candidate(key=doc_key(hit.doc), score=float(hit.score), doc=hit.doc)
            for hit in hits
            if floor is None or hit.score > floor
        ]
