"""`Retriever`: a question in, cited hits out, from every lane the read models offer.

1. Gather: the exact, keyword, vector and verbatim lanes run concurrently, each with a time limit and a
   pool of candidates well beyond `limit`.
2. Entity candidates are resolved to the version holding at the asked time; those with none are left out.
   An entity found only by name that has nothing asserted about it (no summary: a turn's speaker, say)
   is no answer by itself: it seeds the traversal but is not a candidate.
3. The traversal lane starts from the best entities so far (a first ordering of step 1).
4. Order: all lanes are fused by the profile (the calibrated fusion by default, with the question's time
   intent); the best `limit` keys become hits with citations.

A lane that fails or times out is reported and left out: the answer degrades, with a warning, instead of
failing. Read models are asked for through a callable because a rebuild swaps stores while serving.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

import msgspec

from readmodels.graph.lookup import Span, cited_spans
from readmodels.graph.model import InvalidGraphWrite, canonical_ts
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.after import query_models, waited, with_consistency
from readmodels.retrieval.completion import complete_vector_lane
from readmodels.retrieval.edge_proposals import with_proposed_edges
from readmodels.retrieval.fusion import LANES, FusedHit, profile
from readmodels.retrieval.hits import HitBuilder
from readmodels.retrieval.invalidated import NoLongerHolding, no_longer_holding
from readmodels.retrieval.lanes import (
    ENTITY_PREFIX,
    VECTOR_MIN_SCORE,
    VERBATIM_KINDS,
    Candidate,
    DocumentLane,
    ExactLane,
    LaneOutcome,
)
from readmodels.retrieval.model import (
    Hit,
    InferredLink,
    Invalidation,
    LaneReport,
    Query,
    QueryError,
    QueryResult,
    TaskState,
)
from readmodels.retrieval.ordering import Ordering, lane_hits
from readmodels.retrieval.read_models import ReadModels
from readmodels.retrieval.resolve import Resolved, resolve_entities
from readmodels.retrieval.same_as import classes_of, merge_same_as, within_session
from readmodels.retrieval.spreads import lane_spreads
from readmodels.retrieval.traversal import MAX_SEEDS, TraversalLane
from readmodels.retrieval.work import TASK_TYPE, work_intent, work_state

T = TypeVar("T")
MIN_POOL: Final = 50
WORD_LANES: Final = ("exact", "keyword", "verbatim")
"""The lanes that find a candidate by the question's words (the vector lane finds something for any)."""
LANE_TIMEOUT_S: Final = 5.0


@dataclass(frozen=True)
class Gathered:
    """What the first stage found for a question, ready to be ordered (`Retriever.answer`)."""

    query: Query
    models: ReadModels
    lanes: dict[str, list[Candidate]]
    resolved: dict[str, Resolved]
    excluded: set[str]
    invalidations: list[Invalidation]
    links: dict[str, InferredLink]
    reports: list[LaneReport]
    warnings: list[str]
    order: Ordering


Searcher = Callable[[str, str | None, str | None, int], Awaitable[list[Candidate]]]


class Retriever:
    def __init__(self, models: Callable[[], ReadModels], *, lane_timeout_s: float = LANE_TIMEOUT_S) -> None:
        self._models = models
        self.lane_timeout_s = lane_timeout_s

    def read_models(self) -> ReadModels:
        """The read models a question would be answered from now."""
        return self._models()

    async def query(self, query: Query) -> QueryResult:
        """Answer `query`; given `after`, once the read models it reads have applied that event (or its
        wait ran out: the result's `consistency` then names those that lag)."""
        consistency = await waited(query.after, query.after_wait_ms, self._models, query_models(query))
        started = time.perf_counter()
        gathered = await self.gather(query)
        return with_consistency(await self.answer(gathered, query.limit, started), consistency)

    async def gather(self, query: Query) -> Gathered:
        """The first stage: every lane's candidates, resolved at the asked time (nothing ordered yet)."""
        as_of = _canonical_as_of(query.as_of)
        chosen = profile(query.profile)
        if query.fusion is not None:
            chosen = msgspec.structs.replace(chosen, fusion=query.fusion)
        wanted = [lane for lane in (query.lanes or LANES) if chosen.weights.get(lane, 0) > 0]
        models = self._models()
        pool = max(MIN_POOL, 3 * query.limit)
        # traversal alone still needs somewhere to start: the entities the question names
        first: list[str] = [lane for lane in wanted if lane != "traversal"] or ["exact"]
        spread_stores = (
            {"keyword": models.keyword, "vector": models.vector} if chosen.fusion == "calibrated" else {}
        )
        spreading = asyncio.ensure_future(
            lane_spreads(
                spread_stores,
                query.text,
                session=query.session,
                as_of=as_of,
                wanted=wanted,
                timeout_s=self.lane_timeout_s,
            )
        )
        outcomes: dict[str, LaneOutcome] = dict(
            zip(
                first,
                await asyncio.gather(
                    *(self._run(self._searcher(lane, models), query, as_of, pool) for lane in first)
                ),
                strict=True,
            )
        )
        spreads = await spreading
        warnings: list[str] = []
        resolved, excluded = await self._resolve(models, outcomes, as_of, warnings)
        gone = await self._no_longer_holding(models, outcomes, excluded, as_of, warnings)
        excluded |= gone.candidates
        lanes: dict[str, list[Candidate]] = {
            lane: [c for c in o.candidates if c.key not in excluded] for lane, o in outcomes.items()
        }
        if chosen.fusion == "calibrated":
            warnings += await complete_vector_lane(models.vector, query.text, lanes, self.lane_timeout_s)
        tag = models.vector.tag if models.vector else None
        order = Ordering(chosen, tag, query.text, lanes, resolved, spreads, pool)
        links: dict[str, InferredLink] = {}
        if "traversal" in wanted:
            seeds = _seeds(order.fuse(lane_hits(lanes)), resolved)
            outcomes["traversal"], links = await self._traverse(models, seeds, query, as_of)
            lanes["traversal"] = outcomes["traversal"].candidates
        if "exact" in lanes:
            lanes["exact"] = [c for c in lanes["exact"] if not _nameless(c, resolved)]
        for lane in set(lanes) - set(wanted):
            del lanes[lane]  # a lane that only seeded the traversal
        reports = [_report(lane, outcomes[lane]) for lane in wanted if lane in outcomes]
        warnings[:0] = [f"lane {r.lane} left out: {r.error}" for r in reports if r.error]
        return Gathered(
            query=query,
            models=models,
            lanes=lanes,
            resolved=resolved,
            excluded=excluded,
            invalidations=gone.invalidations,
            links=links,
            reports=reports,
            warnings=warnings,
            order=order,
        )

    async def answer(
        self, gathered: Gathered, limit: int | None, started: float | None = None
    ) -> QueryResult:
        """The second stage: the gathered candidates ordered by the profile, the best `limit` as hits."""
        started = time.perf_counter() if started is None else started
        fused = gathered.order.fuse(lane_hits(gathered.lanes), limit)
        warnings = list(gathered.warnings)
        spans = await self._spans(gathered.models, fused, gathered.resolved, warnings)
        builder = HitBuilder(gathered.order.chosen, gathered.lanes, gathered.resolved, gathered.links, spans)
        hits = [hit for hit in map(builder.build, fused) if hit is not None]
        hits = await self._same_as(gathered, hits, warnings)
        if (graph := gathered.models.graph) is not None:
            as_of = _canonical_as_of(gathered.query.as_of)
            work = with_proposed_edges(graph, gathered.models.trust, hits, as_of)
            hits = await self._guarded(work, "edges of proposals not read", warnings, hits)
        if (session := gathered.query.session) is not None:
            hits = [hit for hit in hits if all(c.session == session for c in hit.citations)]
        reached = [v for v in map(_version_of(gathered), (hit.key for hit in hits)) if v is not None]
        return QueryResult(
            query=gathered.query,
            hits=hits,
            lanes=gathered.reports,
            warnings=warnings,
            excluded_not_current=len(gathered.excluded),
            invalidated=gathered.invalidations,
            work=await self._work(gathered, reached, warnings),
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

    async def _guarded(self, work: Awaitable[T], what: str, warnings: list[str], otherwise: T) -> T:
        """`work` within the lane time limit; if it fails, `otherwise` and a warning saying `what`."""
        try:
            return await asyncio.wait_for(work, self.lane_timeout_s)
        except Exception as exc:
            warnings.append(f"{what} ({type(exc).__name__}: {exc})")
            return otherwise

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
        work = resolve_entities(models.graph, candidates, as_of)
        return await self._guarded(work, "entity windows not checked", warnings, ({}, set()))

    async def _no_longer_holding(
        self,
        models: ReadModels,
        outcomes: Mapping[str, LaneOutcome],
        excluded: set[str],
        as_of: str | None,
        warnings: list[str],
    ) -> NoLongerHolding:
        nothing = NoLongerHolding(candidates=set(), invalidations=[])
        if models.graph is None:
            return nothing
        candidates = [c for outcome in outcomes.values() for c in outcome.candidates]
        relevant = {c.key for lane in WORD_LANES if lane in outcomes for c in outcomes[lane].candidates}
        work = no_longer_holding(models.graph, candidates, excluded, as_of, relevant)
        return await self._guarded(work, "events of invalidated facts not checked", warnings, nothing)

    async def _work(
        self, gathered: Gathered, reached: list[EntityVersion], warnings: list[str]
    ) -> list[TaskState]:
        query, graph = gathered.query, gathered.models.graph
        asks = work_intent(query.text)
        if graph is None or not (asks or any(v.entity_type == TASK_TYPE for v in reached)):
            return []
        as_of = _canonical_as_of(query.as_of)
        work = work_state(graph, reached, session=query.session, as_of=as_of, asks_about_work=asks)
        return await self._guarded(work, "work state not read", warnings, [])

    async def _same_as(self, gathered: Gathered, hits: list[Hit], warnings: list[str]) -> list[Hit]:
        """Each accepted `same_as` class answers once, with all its facts (`readmodels.retrieval.same_as`)."""
        version_of = _version_of(gathered)
        versions = {hit.key: v for hit in hits if (v := version_of(hit.key)) is not None}
        graph = gathered.models.graph
        if graph is None or not versions:
            return hits
        as_of = _canonical_as_of(gathered.query.as_of)
        work = classes_of(graph, list(versions.values()), as_of)
        classes = await self._guarded(work, "same_as links not followed", warnings, {})
        if (session := gathered.query.session) is not None:
            classes = {uid: part for uid, eq in classes.items() if (part := within_session(eq, session))}
        return merge_same_as(hits, {key: v.uid for key, v in versions.items()}, classes)

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
        work = models.graph.read(cited_spans(uids))
        return await self._guarded(work, "source spans of entities not read", warnings, {})


def _canonical_as_of(as_of: str | None) -> str | None:
    if as_of is None:
        return None
    try:
        return canonical_ts(as_of)
    except InvalidGraphWrite as exc:
        raise QueryError(f"as_of: {exc}") from None


def _version_of(gathered: Gathered) -> Callable[[str], EntityVersion | None]:
    """The entity version a hit's key stands for: resolved at the asked time, or reached by traversal."""
    reached = {c.key: c.neighbour.entity for c in gathered.lanes.get("traversal", []) if c.neighbour}

    def version(key: str) -> EntityVersion | None:
        found = gathered.resolved.get(key)
        return found.version if found is not None else reached.get(key)

    return version


def _nameless(candidate: Candidate, resolved: Mapping[str, Resolved]) -> bool:
    """An entity with nothing asserted about it but its name (found by name, it answers nothing)."""
    found = resolved.get(candidate.key)
    return found is not None and not (found.version.summary or "").strip()


def _seeds(ranked: Sequence[FusedHit], resolved: Mapping[str, Resolved]) -> list[str]:
    """The versions (uids) of the best-ranked entities: where traversal starts."""
    seeds = [resolved[hit.key].version.uid for hit in ranked if hit.key in resolved]
    return seeds[:MAX_SEEDS]


def _report(lane: str, outcome: LaneOutcome) -> LaneReport:
    return LaneReport(lane=lane, candidates=len(outcome.candidates), ms=outcome.ms, error=outcome.error)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
