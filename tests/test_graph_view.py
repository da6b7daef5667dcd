"""The core graph's part of the web view (`readmodels.retrieval.graph_view`) on every backend: the graph
now with its history, as of an instant, a search, the neighbourhood of a node or of a name, sessions, and
what it leaves out (generic event entities, another model's nodes, sessions not asked for)."""

from __future__ import annotations

import pytest

from readmodels.graph.protocol import GraphStore
from readmodels.retrieval.graph_view import graph_view
from readmodels.view import ViewGraph, ViewRequest
from tests import test_graph_support as support
from tests.test_graph_support import SessionLog, fact, project, ts

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store


def labels(graph: ViewGraph) -> set[str]:
    return {node.label for node in graph.nodes}


async def test_the_view_of_the_core_graph(graph_store: GraphStore) -> None:
    log, other = SessionLog("s1"), SessionLog("s2")
    log.add("memory.fact.asserted", fact(("cache", "service", "Redis, 5 minutes")))
    log.add(
        "memory.fact.asserted",
        fact(("api", "service", "Takes orders"), relations=[("api", "depends_on", "cache")]),
    )
    log.add("memory.fact.asserted", fact(("cache", "service", "Redis, 60 seconds")))
    log.add("x.note.taken", {"text": "an event no extractor knows"})
    other.add("memory.fact.asserted", fact(("cache", "service", "Memcached")))
    await project(graph_store, log.events + other.events)

    async def view(**asked: object) -> ViewGraph:
        return await graph_store.read(graph_view(ViewRequest(**asked)))  # type: ignore[arg-type]

    now = await view(sessions=["s1"])
    assert labels(now) == {"cache (v1)", "cache (v2)", "api"}  # not the generic x.note.taken#4
    nodes = {node.label: node for node in now.nodes}
    old, new, api = nodes["cache (v1)"], nodes["cache (v2)"], nodes["api"]
    assert (old.kind, old.superseded, old.valid_to, new.superseded) == ("service", True, ts(3), False)
    assert old.citations == [log.events[0].citation] and old.properties["summary"] == "Redis, 5 minutes"
    assert [v.citation for v in new.versions] == [log.events[0].citation, log.events[2].citation]
    edges = {(e.source, e.type, e.target): e for e in now.edges}
    assert edges[(old.id, "SUPERSEDED_BY", new.id)].system
    depends = edges[(api.id, "DEPENDS_ON", new.id)]  # the edge now: drawn to the version that holds now
    assert not depends.system and depends.citation == log.events[1].citation

    then = await view(sessions=["s1"], as_of=ts(2.5))
    assert labels(then) == {"cache (v1)", "api"} and not any(node.superseded for node in then.nodes)
    assert [(e.source, e.type) for e in then.edges] == [(api.id, "DEPENDS_ON")]
    assert labels(await view(sessions=["s1"], as_of=ts(1))) == {"cache (v1)"}

    assert labels(await view(sessions=["s1"], search="60 SECONDS")) == {"cache (v2)"}
    assert {node.session for node in (await view()).nodes} == {"s1", "s2"}
    assert (await view(sessions=[])).nodes == []
    assert labels(await view(sessions=["s1"], limit=1)) == {"cache (v2)"}  # the newest

    assert labels(await view(focus=api.id)) == {"api", "cache (v2)"}
    history = await view(focus=old.id)  # a version: its entity's other versions, and their neighbours now
    assert labels(history) == {"cache (v1)", "cache (v2)", "api"}
    assert labels(await view(focus=old.id, as_of=ts(3))) == set()  # it no longer held then
    by_name = await view(focus="CACHE", sessions=["s2"])
    assert labels(by_name) == {"cache"} and by_name.nodes[0].session == "s2"
    assert (await view(focus="claims:Claim:s1/1")).nodes == []
