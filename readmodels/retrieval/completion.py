"""Completing the vector lane: scoring, in it, the document candidates other lanes found and it did not."""

from __future__ import annotations

import asyncio

from readmodels.documents import MemoryDoc
from readmodels.retrieval.lanes import Candidate
from readmodels.retrieval.protocol import DocumentScores


async def complete_vector_lane(
    vector: object | None, text: str, lanes: dict[str, list[Candidate]], timeout_s: float
) -> list[str]:
    """Score, in the vector lane, the document candidates it did not return.

    A candidate found by the keyword lane only would otherwise count as the vector lane's worst. The
    scores come after the lane's pool (their rank says so). A store that cannot score given
    documents (`DocumentScores`) is left as it is. The keyword lane is not completed: FTS5 pays for
    every posting of the question's words to score even one document (40-60 ms at 100,000 events),
    and a document it did not return shares few of the question's words. Returns warnings.
    """
    docs: dict[str, MemoryDoc] = {}
    for found in lanes.values():
        for candidate in found:
            if candidate.doc is not None:
                docs.setdefault(candidate.key, candidate.doc)
    stores = {"vector": vector}
    work: dict[str, tuple[DocumentScores, list[str]]] = {}
    for lane, store in stores.items():
        if lane in lanes and isinstance(store, DocumentScores):
            returned = {c.key for c in lanes[lane]}
            missing = [key for key in docs if key not in returned]
            if missing:
                work[lane] = (store, missing)
    outcomes = await asyncio.gather(
        *(
            asyncio.wait_for(store.scores(text, [docs[key] for key in keys]), timeout_s)
            for store, keys in work.values()
        ),
        return_exceptions=True,
    )
    warnings: list[str] = []
    for (lane, (_, keys)), scores in zip(work.items(), outcomes, strict=True):
        if isinstance(scores, BaseException):
            warnings.append(f"lane {lane}: other lanes' candidates not scored ({type(scores).__name__})")
            continue
        extra = [
            Candidate(key=key, score=score, doc=docs[key], completed=True)
            for key, score in zip(keys, scores, strict=True)
            if score is not None
        ]
        lanes[lane] += sorted(extra, key=lambda c: (-c.score, c.key))
    return warnings
