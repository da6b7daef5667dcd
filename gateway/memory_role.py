"""The query service inside a node: memory queries answered from the read models its projectors keep.

The projectors own their stores (and swap them on a rebuild); the service asks for the stores of the
projectors that are running and ready at each query, so it always reads the live generation.
"""

from __future__ import annotations

from projectors.graph.projector import GraphProjector
from projectors.inferred.plugin import InferredProjector
from projectors.keyword.plugin import KeywordProjector
from projectors.runtime import ProjectorRunner
from projectors.vector.plugin import VectorProjector
from readmodels.graph.ladybug import LadybugGraphStore
from readmodels.graph.neo4j import Neo4jGraphStore
from readmodels.inferred.sqlite_store import SqliteInferredStore
from readmodels.query.local import LocalMemory
from readmodels.retrieval.retriever import ReadModels

MEMORY_PROJECTORS = ("graph", "keyword", "vector")
"""The projectors whose read models answer queries: a node running any of them serves queries."""


class LiveReadModels:
    """The runners of this process's projectors, by name, as they start."""

    def __init__(self) -> None:
        self.runners: dict[str, ProjectorRunner] = {}

    def add(self, runner: ProjectorRunner) -> None:
        self.runners[runner.projector.name] = runner

    def _ready(self, name: str) -> object | None:
        runner = self.runners.get(name)
        return runner.projector if runner is not None and runner.ready.is_set() else None

    def models(self) -> ReadModels:
        keyword, vector = self._ready("keyword"), self._ready("vector")
        graph, inferred = self._ready("graph"), self.inferred()
        store = graph.store if isinstance(graph, GraphProjector) else None
        return ReadModels(
            keyword=keyword.store if isinstance(keyword, KeywordProjector) else None,
            vector=vector.store if isinstance(vector, VectorProjector) else None,
            graph=store if isinstance(store, LadybugGraphStore | Neo4jGraphStore) else None,
            trust=inferred,
        )

    def inferred(self) -> SqliteInferredStore | None:
        projector = self._ready("inferred")
        return projector.store if isinstance(projector, InferredProjector) else None

    def memory(self) -> LocalMemory:
        return LocalMemory(self.models, self.inferred)
