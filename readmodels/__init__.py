"""Read models built from the log: store contracts, backends, retrieval, the Memory Checkout and the query
service.

What a user of the read models imports from here: the checkpoint contract every store keeps
(`TrackingRecorder`), the store contracts (`GraphStore`, `KeywordStore`,
`VectorStore`, `InferredStatusReader`, `Embedder`) and the document they index (`MemoryDoc`); a question
and its answer (`Query`, `QueryResult`, `Hit`, `Citation`; `CausalRequest`, `CausalChain`); the checkout
(`CheckoutRequest`, `MemoryCheckout`); and memory to ask (`MemoryService`: `MemoryClient` over NATS, or
`LocalMemory` over stores open in this process, with `Retriever` and `ReadModels`). The backends live in
`readmodels.neo4j` and `readmodels.embedded`; `readmodels.backends` picks them from the settings.

The names in `__all__` are imported on first use (PEP 562): importing one module of the package does not
import the query service, retrieval and every store contract with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.lazy import lazy_exports

if TYPE_CHECKING:
    from readmodels.checkout.model import CheckoutRequest, MemoryCheckout
    from readmodels.documents import MemoryDoc
    from readmodels.graph.protocol import GraphStore
    from readmodels.inferred.protocol import InferredStatusReader
    from readmodels.keyword.protocol import KeywordStore
    from readmodels.query.client import MemoryClient
    from readmodels.query.local import LocalMemory
    from readmodels.query.protocol import MemoryService, MemoryUnavailableError
    from readmodels.retrieval.causal_chains import CausalChain, CausalRequest
    from readmodels.retrieval.model import Citation, Hit, Query, QueryResult
    from readmodels.retrieval.read_models import ReadModels
    from readmodels.retrieval.retriever import Retriever
    from readmodels.tracking import Housekeeping, TrackingRecorder
    from readmodels.vector.embedders import Embedder
    from readmodels.vector.protocol import VectorStore
    from readmodels.view import ViewEdge, ViewGraph, ViewNode, ViewRequest, ViewVersion

_LAZY: dict[str, str] = {
    "CausalChain": "readmodels.retrieval.causal_chains",
    "CausalRequest": "readmodels.retrieval.causal_chains",
    "CheckoutRequest": "readmodels.checkout.model",
    "Citation": "readmodels.retrieval.model",
    "Embedder": "readmodels.vector.embedders",
    "GraphStore": "readmodels.graph.protocol",
    "Hit": "readmodels.retrieval.model",
    "Housekeeping": "readmodels.tracking",
    "InferredStatusReader": "readmodels.inferred.protocol",
    "KeywordStore": "readmodels.keyword.protocol",
    "LocalMemory": "readmodels.query.local",
    "MemoryCheckout": "readmodels.checkout.model",
    "MemoryClient": "readmodels.query.client",
    "MemoryDoc": "readmodels.documents",
    "MemoryService": "readmodels.query.protocol",
    "MemoryUnavailableError": "readmodels.query.protocol",
    "Query": "readmodels.retrieval.model",
    "QueryResult": "readmodels.retrieval.model",
    "ReadModels": "readmodels.retrieval.read_models",
    "Retriever": "readmodels.retrieval.retriever",
    "TrackingRecorder": "readmodels.tracking",
    "VectorStore": "readmodels.vector.protocol",
    "ViewEdge": "readmodels.view",
    "ViewGraph": "readmodels.view",
    "ViewNode": "readmodels.view",
    "ViewRequest": "readmodels.view",
    "ViewVersion": "readmodels.view",
}

__all__ = [
    "CausalChain",
    "CausalRequest",
    "CheckoutRequest",
    "Citation",
    "Embedder",
    "GraphStore",
    "Hit",
    "Housekeeping",
    "InferredStatusReader",
    "KeywordStore",
    "LocalMemory",
    "MemoryCheckout",
    "MemoryClient",
    "MemoryDoc",
    "MemoryService",
    "MemoryUnavailableError",
    "Query",
    "QueryResult",
    "ReadModels",
    "Retriever",
    "TrackingRecorder",
    "VectorStore",
    "ViewEdge",
    "ViewGraph",
    "ViewNode",
    "ViewRequest",
    "ViewVersion",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
