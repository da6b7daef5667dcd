"""What the inferred-edge read model answers, whatever holds it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from readmodels.inferred.model import InferredStatus


@runtime_checkable
class InferredStatusReader(Protocol):
    """The audit view of inferred and causal edges: counts, confidence, trust, provenance."""

    async def status(self, session: str | None = None) -> InferredStatus: ...


@runtime_checkable
class InferredStore(InferredStatusReader, Protocol):
    """The inferred-edge model as the query service reads it: the audit view and each edge's trust."""

    async def trust(self, keys: Sequence[str]) -> dict[str, float]: ...
