"""`Retriever`: a question in, cited hits out, from every lane the read models offer.

1. The exact, keyword, vector and verbatim lanes run concurrently, each with a time limit.
2. Entity candidates are resolved to the version holding at the asked time; those with none are left out.
3. The traversal lane starts from the best entities so far (a first fusion of step 1).
4. All lanes are fused by the profile; the best `limit` keys become hits with citations.

A lane that fails or times out is reported and left out: the answer degrades, with a warning, instead of
failing. Read models are asked for through a callable because a rebuild swaps stores while serving.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from readmodels.graph.lookup import Span, cited_spans
from readmodels.graph.model import InvalidGraphWrite, canonical_ts
from readmodels.retrieval.fusion import LANES, FusedHit, LaneHit, fuse, profile
from readmodels.retrieval.hits import HitBuilder
from readmodels.retrieval.lanes import (
    ENTITY_PREFIX,
    VECTOR_MIN_SCORE,
    VERBATIM_KINDS,
    Candidate,
    DocumentLane,
    ExactLane,
    LaneOutcome,
)
from readmodels.retrieval.model import InferredLink, LaneReport, Query, QueryError, QueryResult
from readmodels.retrieval.protocol import DocumentSearch, GraphReads, TrustLookup
from readmodels.retrieval.resolve import Resolved, resolve_entities
from readmodels.retrieval.traversal import MAX_SEEDS, TraversalLane

MIN_POOL: Final = 30
LANE_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class ReadModels:
    """The read models a retriever may use; any may be missing (its lanes then report so)."""

    keyword: DocumentSearch | None = None
    vector: DocumentSearch | None = None
    graph: GraphReads | None = None
    trust: TrustLookup | None = None


Searcher = Callable[[str, str | None, str | None, int], Awaitable[list[Candidate]]]


class Retriever:
    def __init__(self, models: Callable[[], ReadModels], *, lane_timeout_s: float = LANE_TIMEOUT_S) -> None:
        self._models = models
        self.lane_timeout_s = lane_timeout_s

    async def query(self, query: Query) -> QueryResult:
        started = time.perf_counter()
        as_of = _canonical_as_of(query.as_of)
        chosen = profile(query.profile)
        if query.fusion is not None:
            chosen = msgspec.structs.replace(chosen, fusion=query.fusion)
        wanted = [lane for lane in (query.lanes or LANES) if chosen.weights.get(lane, 0) > 0]
        models = self._models()
        pool = max(MIN_POOL, 3 * query.limit)
        first: list[str] = [lane for lane in wanted if lane != "traversal"]
        outcomes: dict[str, LaneOutcome] = dict(
            zip(
                first,
                await asyncio.gather(
                    *(self._run(self._searcher(lane, models), query, as_of, pool) for lane in first)
                ),
                strict=True,
            )
        )
        warnings: list[str] = []
        resolved, excluded = await self._resolve(models, outcomes, as_of, warnings)
        lanes: dict[str, list[Candidate]] = {
            lane: [c for c in o.candidates if c.key not in excluded] for lane, o in outcomes.items()
        }
        links: dict[str, InferredLink] = {}
        if "traversal" in wanted:
            seeds = _seeds(fuse(_lane_hits(lanes), chosen), resolved)
            outcomes["traversal"], links = await self._traverse(models, seeds, query, as_of)
            lanes["traversal"] = outcomes["traversal"].candidates
        fused = fuse(_lane_hits(lanes), chosen, query.limit)
        spans = await self._spans(models, fused, resolved, warnings)
        builder = HitBuilder(chosen, lanes, resolved, links, spans)
        hits = [hit for hit in map(builder.build, fused) if hit is not None]
        reports = [_report(lane, outcomes[lane]) for lane in wanted if lane in outcomes]
        warnings[:0] = [f"lane {r.lane} left out: {r.error}" for r in reports if r.error]
        return QueryResult(
            query=query,
            hits=hits,
            lanes=reports,
            warnings=warnings,
            excluded_not_current=len(excluded),
            ms=round((time.perf_counter() - started) * 1000, 3),
        )

    def _searcher(self, lane: str, models: ReadModels) -> Searcher | str:
        """The lane's search, or why it cannot run."""
        if lane == "exact":
            return ExactLane(models.graph).search if models.graph else "no graph read model"
        if lane == "keyword":
            return DocumentLane(lane, models.keyword).search if models.keyword else "no keyword read model"
        if lane == "vector":
            if models.vector is None:
                return "no vector read model"
            return DocumentLane(lane, models.vector, min_score=VECTOR_MIN_SCORE).search
        if lane == "verbatim":
            if models.keyword is None:
                return "no keyword read model"
            return DocumentLane(lane, models.keyword, VERBATIM_KINDS).search
        return f"unknown lane {lane!r}"

    async def _run(self, searcher: Searcher | str, query: Query, as_of: str | None, pool: int) -> LaneOutcome:
        if isinstance(searcher, str):
            return LaneOutcome(error=searcher)
        return await self._timed(searcher(query.text, query.session, as_of, pool))

    async def _timed(self, work: Awaitable[list[Candidate]]) -> LaneOutcome:
        started = time.perf_counter()
        try:
            candidates = await asyncio.wait_for(work, self.lane_timeout_s)
        except TimeoutError:
            return LaneOutcome(error=f"timed out after {self.lane_timeout_s:g}s", ms=_since(started))
        except Exception as exc:  # a lane's failure degrades the answer, never fails it
            return LaneOutcome(error=f"{type(exc).__name__}: {exc}", ms=_since(started))
        return LaneOutcome(candidates=candidates, ms=_since(started))

    async def _resolve(
        self,
        models: ReadModels,
        outcomes: Mapping[str, LaneOutcome],
        as_of: str | None,
        warnings: list[str],
    ) -> tuple[dict[str, Resolved], set[str]]:
        candidates = [c for outcome in outcomes.values() for c in outcome.candidates]
        if models.graph is None or not any(c.key.startswith(ENTITY_PREFIX) for c in candidates):
            return {}, set()
        try:
            return await asyncio.wait_for(
                resolve_entities(models.graph, candidates, as_of), self.lane_timeout_s
            )
        except Exception as exc:
            warnings.append(f"entity windows not checked ({type(exc).__name__}: {exc})")
            return {}, set()

    async def _traverse(
        self, models: ReadModels, seeds: list[str], query: Query, as_of: str | None
    ) -> tuple[LaneOutcome, dict[str, InferredLink]]:
        if models.graph is None:
            return LaneOutcome(error="no graph read model"), {}
        lane = TraversalLane(models.graph, models.trust)
        found: dict[str, InferredLink] = {}

        async def search() -> list[Candidate]:
            candidates, links = await lane.search(seeds, query.depth, as_of, query.include_inferred)
            found.update(links)
            return candidates

        return await self._timed(search()), found

    async def _spans(
        self,
        models: ReadModels,
        fused: Sequence[FusedHit],
        resolved: Mapping[str, Resolved],
        warnings: list[str],
    ) -> dict[str, list[Span]]:
        uids = [resolved[hit.key].version.uid for hit in fused if hit.key in resolved]
        if models.graph is None or not uids:
            return {}
        try:
            return await asyncio.wait_for(models.graph.read(cited_spans(uids)), self.lane_timeout_s)
        except Exception as exc:
            warnings.append(f"source spans of entities not read ({type(exc).__name__}: {exc})")
            return {}


def _canonical_as_of(as_of: str | None) -> str | None:
    if as_of is None:
        return None
    try:
        return canonical_ts(as_of)
    except InvalidGraphWrite as exc:
        raise QueryError(f"as_of: {exc}") from None


def _lane_hits(lanes: Mapping[str, Sequence[Candidate]]) -> dict[str, list[LaneHit]]:
    return {lane: [LaneHit(key=c.key, score=c.score) for c in found] for lane, found in lanes.items()}


def _seeds(ranked: Sequence[FusedHit], resolved: Mapping[str, Resolved]) -> list[str]:
    """The versions (uids) of the best-ranked entities: where traversal starts."""
    seeds = [resolved[hit.key].version.uid for hit in ranked if hit.key in resolved]
    return seeds[:MAX_SEEDS]


def _report(lane: str, outcome: LaneOutcome) -> LaneReport:
    return LaneReport(lane=lane, candidates=len(outcome.candidates), ms=outcome.ms, error=outcome.error)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
