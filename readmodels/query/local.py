"""`LocalMemory`: a `MemoryService` over read models open in this process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

import msgspec

from eventloom.position import Position
from readmodels.checkout.assemble import assemble_context
from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.graph.cypher.io import Reading
from readmodels.inferred.model import InferredStatus
from readmodels.inferred.protocol import InferredStatusReader
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.retrieval.after import GRAPH_READS, waited, with_consistency
from readmodels.retrieval.candidates import (
    CandidateList,
    CandidateListRequest,
    CandidateLookup,
    CandidateRequest,
    candidate_list,
    candidate_show,
)
from readmodels.retrieval.causal_chains import CausalChain, CausalRequest, causal_chain
from readmodels.retrieval.causal_reads import (
    CausalExplainRequest,
    CausalExplanation,
    CausalPathRequest,
    CausalPaths,
    causal_explanation,
    causal_paths,
)
from readmodels.retrieval.graph_view import graph_view
from readmodels.retrieval.model import Query, QueryResult
from readmodels.retrieval.read_models import ReadModels
from readmodels.retrieval.retriever import Retriever
from readmodels.view import ViewGraph, ViewRequest

S = TypeVar("S", bound=msgspec.Struct)


class LocalMemory:
    def __init__(
        self,
        models: Callable[[], ReadModels],
        inferred: Callable[[], InferredStatusReader | None] = lambda: None,
    ) -> None:
        self.retriever = Retriever(models)
        self._models = models
        self._inferred = inferred

    async def query(self, query: Query) -> QueryResult:
        return await self.retriever.query(query)

    async def checkout(self, request: CheckoutRequest) -> MemoryCheckout:
        return await assemble_context(self.retriever, request)

    async def inferred_status(self, session: str | None = None) -> InferredStatus:
        store = self._inferred()
        if store is None:
            raise MemoryUnavailableError("the inferred-edge read model is not running here")
        return await store.status(session)

    async def causal(self, request: CausalRequest) -> CausalChain:
        return await self._graph_read(request, causal_chain(request))

    async def causal_path(self, request: CausalPathRequest) -> CausalPaths:
        return await self._graph_read(request, causal_paths(request))

    async def causal_explain(self, request: CausalExplainRequest) -> CausalExplanation:
        return await self._graph_read(request, causal_explanation(request))

    async def candidates(self, request: CandidateListRequest) -> CandidateList:
        return await self._graph_read(request, candidate_list(request))

    async def candidate(self, request: CandidateRequest) -> CandidateLookup:
        return await self._graph_read(request, candidate_show(request))

    async def graph_view(self, request: ViewRequest) -> ViewGraph:
        return await self._graph_read(request, graph_view(request))

    async def _graph_read(self, request: ReadsAfter, reading: Reading[S]) -> S:
        """A read of the graph alone; given `after`, once the graph has applied it (or the wait ran out)."""
        consistency = await waited(request.after, request.after_wait_ms, self._models, GRAPH_READS)
        graph = self._models().graph  # asked after the wait: a rebuild may have swapped it meanwhile
        if graph is None:
            raise MemoryUnavailableError("the graph read model is not running here")
        return with_consistency(await graph.read(reading), consistency)


class ReadsAfter(Protocol):
    """A request that may ask to read its own writes."""

    @property
    def after(self) -> Position | None: ...

    @property
    def after_wait_ms(self) -> int: ...
