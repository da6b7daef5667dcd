"""The query service inside a node: memory queries answered from the read models its projectors keep.

The projectors own their stores (and swap them on a rebuild); the service asks for the stores of the
projectors that are running and ready at each query, so it always reads the live generation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping

from projectors.protocol import Projector
from projectors.runner import ProjectorRunner
from projectors.tracking import TrackingProjector
from readmodels.consistency import Progress
from readmodels.graph.protocol import GraphStore
from readmodels.inferred.protocol import InferredStore
from readmodels.keyword.protocol import KeywordStore
from readmodels.query.local import LocalMemory
from readmodels.retrieval.read_models import ReadModels
from readmodels.vector.protocol import VectorStore

MEMORY_PROJECTORS = ("graph", "keyword", "vector")
"""The projectors whose read models answer queries: a node running any of them serves queries."""


class LiveReadModels:
    """The runners of this process's projectors, by name, as they start."""

    def __init__(self) -> None:
        self.runners: dict[str, ProjectorRunner] = {}

    def add(self, runner: ProjectorRunner) -> None:
        self.runners[runner.projector.name] = runner

    def ready(self) -> dict[str, Projector]:
        return {name: r.projector for name, r in self.runners.items() if r.ready.is_set()}

    def memory(self) -> LocalMemory:
        return LocalMemory(
            lambda: dataclasses.replace(read_models(self.ready()), hurry=self.hurry),
            lambda: inferred_store(self.ready()),
        )

    def hurry(self, names: Collection[str]) -> None:
        """A reader waits on these read models: their runners apply what they hold without lingering."""
        for name in names:
            runner = self.runners.get(name)
            if runner is not None:
                runner.hurry()


def read_models(projectors: Mapping[str, Projector]) -> ReadModels:
    """The stores of the built-in memory projectors among `projectors` (open ones only)."""
    keyword, vector = store_of(projectors, "keyword"), store_of(projectors, "vector")
    graph = store_of(projectors, "graph")
    return ReadModels(
        keyword=keyword if isinstance(keyword, KeywordStore) else None,
        vector=vector if isinstance(vector, VectorStore) else None,
        graph=graph if isinstance(graph, GraphStore) else None,
        trust=inferred_store(projectors),
        progress={
            name: projector
            for name, projector in projectors.items()
            if name in (*MEMORY_PROJECTORS, "inferred") and isinstance(projector, Progress)
        },
    )


def store_of(projectors: Mapping[str, Projector], name: str) -> object | None:
    """The store of a built-in projector, whatever its backend: they all keep it in `store`."""
    projector = projectors.get(name)
    if isinstance(projector, TrackingProjector):
        store: object = projector.store
        return store
    return None


def inferred_store(projectors: Mapping[str, Projector]) -> InferredStore | None:
    store = store_of(projectors, "inferred")
    return store if isinstance(store, InferredStore) else None


def memory_over(projectors: Callable[[], Mapping[str, Projector]]) -> LocalMemory:
    """A `LocalMemory` over whatever projectors `projectors()` returns at each question."""
    return LocalMemory(lambda: read_models(projectors()), lambda: inferred_store(projectors()))
