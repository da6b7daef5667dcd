"""`MemoryClient`: a `MemoryService` that asks the query service over NATS (any process, no state)."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import nats.errors
from nats.aio.client import Client

from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
from readmodels.inferred.model import InferredStatus
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.query.responder import timeout_headers
from readmodels.query.service import SUBJECT_PREFIX, InferredRequest, Reply, ServiceHealth
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
from readmodels.retrieval.model import Query, QueryError, QueryResult
from readmodels.view import ViewGraph, ViewRequest

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 30.0


class MemoryQueryFailed(Exception):
    """The query service hit an unexpected error (its message is in this one)."""


class MemoryClient:
    def __init__(self, client: Client, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.client = client
        self.timeout_s = timeout_s

    async def query(self, query: Query) -> QueryResult:
        return await self._ask("query", query, QueryResult)

    async def checkout(self, request: CheckoutRequest) -> MemoryCheckout:
        return await self._ask("checkout", request, MemoryCheckout)

    async def inferred_status(self, session: str | None = None) -> InferredStatus:
        return await self._ask("inferred", InferredRequest(session=session), InferredStatus)

    async def causal(self, request: CausalRequest) -> CausalChain:
        return await self._ask("causal", request, CausalChain)

    async def causal_path(self, request: CausalPathRequest) -> CausalPaths:
        return await self._ask("causal_path", request, CausalPaths)

    async def causal_explain(self, request: CausalExplainRequest) -> CausalExplanation:
        return await self._ask("causal_explain", request, CausalExplanation)

    async def candidates(self, request: CandidateListRequest) -> CandidateList:
        return await self._ask("candidates", request, CandidateList)

    async def candidate(self, request: CandidateRequest) -> CandidateLookup:
        return await self._ask("candidate", request, CandidateLookup)

    async def graph_view(self, request: ViewRequest) -> ViewGraph:
        return await self._ask("graph_view", request, ViewGraph)

    async def health(self) -> ServiceHealth:
        """How a query service and the roles beside it fare (raises MemoryUnavailableError when none
        answers)."""
        return await self._ask("health", {}, ServiceHealth)

    async def _ask(self, name: str, request: Any, answer: type[T]) -> T:
        result = await request_reply(
            self.client,
            SUBJECT_PREFIX + name,
            request,
            self.timeout_s,
            nobody="no query service is running: start the node (`eventloom up --detach`)",
            late="the query service",
        )
        return msgspec.convert(result, answer)


async def request_reply(
    client: Client, subject: str, request: Any, timeout_s: float, *, nobody: str, late: str
) -> Any:
    """Ask `subject` and return the reply's `result` (a `readmodels.query.service.Reply` envelope).

    Raises `MemoryUnavailableError` with `nobody` when no one answers and names `late` when the answer
    does not come in time, `QueryError` for invalid input and `MemoryQueryFailed` for the rest."""
    try:
        response = await client.request(
            subject, msgspec.json.encode(request), timeout=timeout_s, headers=timeout_headers(timeout_s)
        )
    except nats.errors.NoRespondersError:
        raise MemoryUnavailableError(nobody) from None
    except nats.errors.TimeoutError:
        raise MemoryUnavailableError(f"{late} did not answer within {timeout_s:g}s") from None
    reply = msgspec.json.decode(response.data, type=Reply)
    if reply.error is not None:
        if reply.error.code == "invalid_input":
            raise QueryError(reply.error.message)
        if reply.error.code == "unavailable":
            raise MemoryUnavailableError(reply.error.message)
        raise MemoryQueryFailed(reply.error.message)
    return reply.result
