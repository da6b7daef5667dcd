"""`MemoryService`: what an agent can ask memory, in process (`LocalMemory`) or over NATS (`MemoryClient`)."""

from __future__ import annotations

from typing import Protocol

from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.inferred.model import InferredStatus
from readmodels.retrieval.candidates import (
    CandidateList,
    CandidateListRequest,
    CandidateLookup,
    CandidateRequest,
)
from readmodels.retrieval.causal_chains import CausalChain, CausalRequest
from readmodels.retrieval.causal_reads import (
    CausalExplainRequest,
    CausalExplanation,
    CausalPathRequest,
    CausalPaths,
)
from readmodels.retrieval.model import Query, QueryResult
from readmodels.view import ViewGraph, ViewRequest


class MemoryUnavailableError(Exception):
    """No query service answered, or the read model asked for does not exist yet."""


class MemoryService(Protocol):
    async def query(self, query: Query) -> QueryResult: ...

    async def checkout(self, request: CheckoutRequest) -> MemoryCheckout: ...

    async def inferred_status(self, session: str | None = None) -> InferredStatus: ...

    async def causal(self, request: CausalRequest) -> CausalChain:
        """The causal successors or predecessors of an entity (`readmodels.retrieval.causal_chains`)."""
        ...

    async def causal_path(self, request: CausalPathRequest) -> CausalPaths:
        """The shortest causal paths from one entity to another (`readmodels.retrieval.causal_reads`)."""
        ...

    async def causal_explain(self, request: CausalExplainRequest) -> CausalExplanation:
        """Why an outcome happened: its causal predecessors and cited explanations (`causal_reads`)."""
        ...

    async def candidates(self, request: CandidateListRequest) -> CandidateList:
        """Consolidation candidates by status, type and session (`readmodels.retrieval.candidates`)."""
        ...

    async def candidate(self, request: CandidateRequest) -> CandidateLookup:
        """One consolidation candidate (or proposed `same_as` edge) in full, with its review history."""
        ...

    async def graph_view(self, request: ViewRequest) -> ViewGraph:
        """The core graph as the web view draws it (`readmodels.retrieval.graph_view`)."""
        ...
