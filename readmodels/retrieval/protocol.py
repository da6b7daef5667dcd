"""What retrieval needs from the read models: small contracts any backend (or a plug-in) can satisfy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

from readmodels.documents import DocKind, MemoryDoc, ScoreSpread
from readmodels.graph.cypher.io import Reading
from readmodels.retrieval.model import Query, QueryResult

T = TypeVar("T")


class DocHit(Protocol):
    """A document a search found (`KeywordHit`, `VectorHit`)."""

    @property
    def doc(self) -> MemoryDoc: ...

    @property
    def score(self) -> float: ...


class DocumentSearch(Protocol):
    """Ranked search over memory documents: the keyword and the vector read models."""

    async def search(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
        limit: int = 10,
    ) -> Sequence[DocHit]: ...


@runtime_checkable
class DocumentScores(Protocol):
    """A document search that can also score given documents (what the calibrated fusion completes a
    candidate with when this lane did not return it). Optional: a store without it is imputed."""

    async def scores(self, text: str, docs: Sequence[MemoryDoc]) -> list[float | None]:
        """This lane's score of each document for `text`, in order; None where it has none (no word in
        common, no vector)."""
        ...


@runtime_checkable
class DocumentSpread(Protocol):
    """A document search that can also say how its scores spread over every document in scope (what the
    gated fusion reads to weigh this lane for a question). Optional: without it, the spread is estimated
    from the lane's own candidates."""

    async def spread(
        self,
        text: str,
        *,
        session: str | None = None,
        as_of: str | None = None,
        kinds: Sequence[DocKind] | None = None,
    ) -> ScoreSpread | None:
        """The count, mean and standard deviation of this search's score over every document passing the
        filters (an unmatched document scores 0); None when nothing is in scope."""
        ...


class VectorSearch(DocumentSearch, Protocol):
    """A document search by embedding: the vector read model, which names its vector space."""

    @property
    def tag(self) -> str: ...


class GraphReads(Protocol):
    """Typed reads of the temporal graph (`GraphStore.read`)."""

    async def read(self, reading: Reading[T]) -> T: ...


class TrustLookup(Protocol):
    """The inferred-edge read model's trust per edge key (`readmodels.inferred.model.edge_key`)."""

    async def trust(self, keys: Sequence[str]) -> dict[str, float]: ...


class Memory(Protocol):
    """Anything that answers queries: the local `Retriever` or the query service's client."""

    async def query(self, query: Query) -> QueryResult: ...
