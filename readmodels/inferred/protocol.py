"""What the inferred-edge read model answers, whatever holds it."""

from __future__ import annotations

from typing import Protocol

from readmodels.inferred.model import InferredStatus


class InferredStatusReader(Protocol):
    """The audit view of inferred and causal edges: counts, confidence, trust, provenance."""

    async def status(self, session: str | None = None) -> InferredStatus: ...
