"""`GraphProjector`: the built-in projector that keeps the temporal memory graph up to date."""

from __future__ import annotations

from typing import TypeVar

from projectors.graph.registry import extract
from projectors.tracking import TrackingProjector
from readmodels.graph.model import EventProjection
from readmodels.graph.protocol import GraphWriter

W = TypeVar("W", bound=GraphWriter)


class GraphProjector(TrackingProjector[W, EventProjection]):
    """Extracts each event (pure) and applies the batch to a graph store in one transaction.

    The store keeps the applied seq per (projector `name`, session) in the same transaction as the
    projection, so redelivered events are skipped and effects are exactly once.
    """

    def __init__(self, store: W, name: str = "graph", skipped_sessions: frozenset[str] = frozenset()) -> None:
        super().__init__(name, store, extract, skipped_sessions)
