"""Shared by the retrieval and checkout tests (no tests here): a story projected into every read model."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from eventloom.event import Event
from projectors.inferred.extract import inferred_changes
from projectors.memory_docs import memory_docs
from readmodels.embedded.inferred_store import SqliteInferredStore
from readmodels.embedded.keyword_store import SqliteKeywordStore
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.graph.protocol import GraphStore
from readmodels.retrieval.read_models import ReadModels
from readmodels.vector.embedders import HashEmbedder
from tests.test_graph_support import SessionLog, fact, project, ts


def memory_story() -> SessionLog:
    """Facts that change (postgres), one invalidated (legacy-ldap), a document, an inferred edge."""
    log = SessionLog("r1")
    log.add(
        "transcript.turn", {"role": "user", "speaker": "Maya", "text": "Our token refresh fails at midnight"}
    )
    log.add(
        "memory.fact.asserted",
        fact(
            ("auth-service", "service", "Issues and refreshes OAuth tokens"),
            ("postgres", "database", "Postgres 14 cluster"),
            relations=[("auth-service", "depends_on", "postgres")],
        ),
    )
    log.add(
        "document.indexed",
        {
            "path": "docs/auth.md",
            "title": "Auth",
            "content": "# Auth\n\nTokens are refreshed five minutes early.\n",
            "chunks": [{"text": "Tokens are refreshed five minutes early.", "line_start": 3, "line_end": 3}],
        },
    )
    log.add(
        "decision.made",
        {"decision_id": "d1", "title": "Refresh early", "rationale": "clock skew at midnight"},
    )
    log.add("memory.fact.asserted", fact(("postgres", "database", "Postgres 16 cluster after the upgrade")))
    log.add(
        "memory.fact.asserted",
        fact(
            ("legacy-ldap", "service", "Old LDAP bridge"), ("billing-service", "service", "Charges invoices")
        ),
    )
    log.add(
        "memory.invalidated",
        {
            "entity": {"name": "legacy-ldap", "entity_type": "service"},
            "invalid_at": ts(7),
            "reason": "removed",
        },
    )
    log.add(
        "inference.edge.generated",
        {
            "source": "billing-service",
            "target": "auth-service",
            "relation_type": "depends_on",
            "confidence": 0.6,
            "method": "co_mention_v1",
            "edge_id": "e-1",
        },
    )
    return log


def flag_story() -> SessionLog:
    """A fact asserted by one event and invalidated by a later one (issue 17, defect 3)."""
    log = SessionLog("s")
    log.add("memory.fact.asserted", fact(("flag-x", "feature_flag", "Feature flag X enabled for the beta")))
    log.add("transcript.turn", {"role": "user", "speaker": "Ann", "text": "the beta starts on Monday"})
    log.add(
        "memory.invalidated",
        {
            "entity": {"name": "flag-x", "entity_type": "feature_flag"},
            "invalid_at": ts(3),
            "reason": "flag removed after the beta",
        },
    )
    return log


def work_story_with_owners() -> SessionLog:
    """Tasks open, claimed (and blocked), done (issue 17, defect 4)."""
    log = SessionLog("w")
    log.add("task.proposed", {"task_id": "T1", "title": "Write the sessions migration"})
    log.add("task.proposed", {"task_id": "T2", "title": "Backfill old sessions", "depends_on": ["T1"]})
    log.add("task.claimed", {"task_id": "T2", "assignee": "bob"})
    log.add("task.proposed", {"task_id": "T3", "title": "Rotate the signing keys"})
    log.add("task.completed", {"task_id": "T3", "summary": "rotated"})
    log.add("transcript.turn", {"role": "user", "speaker": "Ann", "text": "the demo is on Friday"})
    return log


class StoryModels:
    def __init__(self, graph: GraphStore, root: Path) -> None:
        self.graph = graph
        self.keyword = SqliteKeywordStore(root / "keyword.sqlite")
        self.vector = SqliteVectorStore(root / "vector.sqlite", HashEmbedder())
        self.inferred = SqliteInferredStore(root / "inferred.sqlite")

    def models(self) -> ReadModels:
        return ReadModels(keyword=self.keyword, vector=self.vector, graph=self.graph, trust=self.inferred)

    async def apply(self, events: Sequence[Event]) -> None:
        await project(self.graph, events)
        await self.keyword.apply("keyword", [memory_docs(e) for e in events])
        await self.vector.apply("vector", [memory_docs(e) for e in events])
        await self.inferred.apply("inferred", [inferred_changes(e) for e in events])


@asynccontextmanager
async def story_models(graph: GraphStore, root: Path, events: Sequence[Event]) -> AsyncIterator[StoryModels]:
    models = StoryModels(graph, root)
    for store in (models.keyword, models.vector, models.inferred):
        await store.open()
    try:
        await models.apply(events)
        yield models
    finally:
        for store in (models.keyword, models.vector, models.inferred):
            await store.close()
