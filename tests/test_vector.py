"""The vector read model: memory documents embedded and searched by cosine, exactly once, tag-safe."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from projectors.generational import GenerationalProjector
from projectors.memory_docs import memory_docs
from projectors.plugins import load_projector
from projectors.rebuild import rebuild
from readmodels.embedded.vector_store import SqliteVectorStore
from readmodels.vector.embedders import HashEmbedder, VectorSpaceError, tag
from readmodels.vector.protocol import VectorStore, embedded_text
from readmodels.vector.static import WordLlamaEmbedder
from tests.runtime_support import drained, running
from tests.test_graph_support import ts
from tests.test_keyword import story

pytestmark = pytest.mark.anyio


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with SqliteVectorStore(tmp_path / "vector.sqlite", HashEmbedder()) as opened:
        yield opened


async def test_search_is_exact_cosine_over_the_filtered_documents(store: SqliteVectorStore) -> None:
    assert isinstance(store, VectorStore)
    events = story().events
    assert await store.apply("vector", [memory_docs(e) for e in events]) == len(events)
    question = "token refresh keeps failing at midnight"
    hits = await store.search(question, session="k1", limit=3)
    document, query = HashEmbedder().embed([embedded_text(hits[0].doc), question])
    assert hits[0].doc.kind == "turn" and hits[0].score == pytest.approx(float(document @ query), abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].citation.startswith("eventloom://k1/events/1#") and hits[0].tag == "hash@1/384"
    assert await store.search("midnight", session="nobody") == []
    assert {h.doc.seq for h in await store.search("midnight refresh", as_of=ts(2), limit=50)} <= {1, 2}
    assert {h.doc.kind for h in await store.search("midnight", kinds=["decision"], limit=50)} == {"decision"}


async def test_exactly_once_survives_reopening_and_other_spaces_are_never_compared(tmp_path: Path) -> None:
    events = story().events
    batch = [memory_docs(e) for e in events]
    path = tmp_path / "vector.sqlite"
    async with SqliteVectorStore(path, HashEmbedder()) as store:
        await store.apply("vector", batch[:2])
        assert await store.apply("vector", batch) == len(batch) - 2
        assert await store.apply("vector", batch) == 0
        before = await store.search("tokens refresh early", limit=20)
    async with SqliteVectorStore(path, HashEmbedder()) as reopened:  # loaded back from SQLite
        assert await reopened.search("tokens refresh early", limit=20) == before
        assert reopened.foreign_vectors == 0
    other_space = SqliteVectorStore(path, HashEmbedder(64))
    with pytest.raises(VectorSpaceError, match=r"hash@1/384.*hash@1/64.*eventloom rebuild vector"):
        await other_space.open()  # a store never holds, nor compares, vectors of two embedders
    await other_space.close()


async def test_the_vector_projector_runs_and_rebuilds_with_another_width(
    log: EventLog, settings: Settings
) -> None:
    events = story().events
    requests = [AppendRequest(session="v1", type=e.type, actor="agent", payload=e.payload) for e in events]
    await log.append_many(requests)
    projector = load_projector("vector", settings)
    assert isinstance(projector, GenerationalProjector) and isinstance(projector.store, SqliteVectorStore)
    async with running(log, projector) as runner:
        await drained(log, runner.consumer)
        live = await projector.store.search("refresh at midnight", limit=100)
        default = WordLlamaEmbedder()  # the default embedder, at its own width
        assert live and all(hit.tag == tag(default) and tag(default).endswith("/256") for hit in live)
    narrower = dataclasses.replace(settings, vector_dimensions=128)
    async with await EventLog.open(narrower) as rebuild_log:
        report = await rebuild(rebuild_log, "vector")
    generation = settings.data_dir / "readmodels" / "vector" / f"gen-{report.generation}"
    async with SqliteVectorStore(generation / "vector.sqlite", WordLlamaEmbedder(128)) as rebuilt:
        hits = await rebuilt.search("refresh at midnight", limit=100)
        assert hits and all(h.tag == tag(WordLlamaEmbedder(128)) for h in hits)
        assert rebuilt.foreign_vectors == 0
        assert {h.doc for h in hits} == {h.doc for h in live}  # every document, re-embedded
