"""The `keyword` entry point: BM25 search in SQLite FTS5 under `<data>/readmodels/keyword`, rebuildable,
or, with `EVENTLOOM_GRAPH_BACKEND=neo4j`, in a full-text index of the graph's Neo4j (rebuilt in place)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eventloom.errors import EventloomError
from eventloom.event import Event
from projectors.doc_projector import InPlaceDocProjector
from projectors.documents import memory_docs
from projectors.plugins import PluginContext
from readmodels.generations import Generations
from readmodels.graph.backends import neo4j_keyword_store
from readmodels.keyword.neo4j_fulltext import Neo4jKeywordStore
from readmodels.keyword.sqlite_fts import SqliteKeywordStore

DATABASE = "keyword.sqlite"


class KeywordProjector:
    """Indexes every event's documents; the checkpoint is written in the same SQLite transaction.

    Rebuildable: `eventloom rebuild keyword` fills a new generation and swaps it in, and this projector
    follows `current` when it is opened again."""

    def __init__(self, context: PluginContext) -> None:
        self.name = context.name
        self.generations = Generations(context.state_dir)
        self.generation = 0
        self._build_into = context.generation
        self.store = SqliteKeywordStore(self._database())

    def _database(self) -> Path:
        if self._build_into is not None:
            return self._build_into / DATABASE
        directory = self.generations.current()
        self.generation = int(directory.name.removeprefix("gen-") or 0)
        return directory / DATABASE

    async def open(self) -> None:
        self.store = SqliteKeywordStore(self._database())
        await self.store.open()

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        return await self.store.applied_seqs(self.name, sessions)

    async def apply(self, events: Sequence[Event]) -> None:
        await self.store.apply(self.name, [memory_docs(event) for event in events])

    async def close(self) -> None:
        await self.store.close()


def keyword_projector(context: PluginContext) -> KeywordProjector | InPlaceDocProjector[Neo4jKeywordStore]:
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError("on Neo4j the keyword model has no generations: it is rebuilt in place")
        return InPlaceDocProjector(context.name, neo4j_keyword_store(context.settings))
    return KeywordProjector(context)
