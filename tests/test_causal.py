"""Causal chains over the graph, on LadybugDB and Neo4j: successors and predecessors, time, retraction,
cycles, the per-hop cap, and the same answer from `LocalMemory`, the query service, `MemoryClient` and
`eventloom memory causal`. The chain is built from real events: the `causal` producer derives its edges
from cited `outcome.explained` events (attached to the entity each cited cause event is about: the decision,
then the earlier outcome), and one edge is appended directly, then retracted."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import msgspec
import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node import Node
from projectors.producers.causal import CausalProducer
from readmodels.graph.protocol import GraphStore
from readmodels.query.client import MemoryClient
from readmodels.query.local import LocalMemory
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.query.service import SUBJECT_PREFIX, Reply, serve_memory
from readmodels.retrieval.causal_chains import CausalChain, CausalRequest, Direction, causal_chain
from readmodels.retrieval.model import QueryError
from readmodels.retrieval.read_models import ReadModels
from tests import test_graph_support as support
from tests.conftest import run_cli
from tests.runtime_support import drained
from tests.test_graph_support import SessionLog, project, ts
from tests.test_query_service import start_node

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store

SESSION = "c1"
SKIPPED = "skip-migrations"  # A: the cause of it all, a decision
SKIPPED_LINE = "skipped migrations"  # how the explanation words A
DRIFT = "schema drift"  # B: caused by A, causes C
OUTAGE = "login outage"  # C
PAGER = "pager storm"  # D: caused by C through a directly appended edge, later retracted
PAGER_EDGE = "causal-pager-storm"
DIRECT_AT, RETRACTED_AT = 6, 7


def explained(outcome: str, cause: str, cause_seq: int, cause_hash: str) -> dict[str, object]:
    return {
        "outcome": outcome,
        "explanation": f"{outcome} followed from {cause}",
        "taxonomy": "caused",
        "cause": cause,
        "cause_event_seq": cause_seq,
        "cause_event_hash": cause_hash,
    }


def derive(log: SessionLog) -> None:
    """Append what the real `causal` producer derives from the log's last event (one edge), reading the
    cause event it cites as `CausalProducer.process` does."""
    source = log.events[-1]
    (derived,) = CausalProducer().derive(source, log.events[int(source.payload["cause_event_seq"]) - 1])
    log.add(derived.type, derived.payload)


def causal_story() -> SessionLog:
    """A caused B, B caused C (both through the producer), C caused D (appended directly, then retracted)."""
    log = SessionLog(SESSION)
    decision = log.add(
        "decision.made", {"decision_id": SKIPPED, "title": "Deploy without running migrations"}
    )
    drift = log.add("outcome.explained", explained(DRIFT, SKIPPED_LINE, decision.seq, decision.hash))
    derive(log)
    outage = log.add("outcome.explained", explained(OUTAGE, DRIFT, drift.seq, drift.hash))
    derive(log)
    direct = {
        "cause": OUTAGE,
        "effect": PAGER,
        "taxonomy": "caused",
        "relation_type": "causal_caused",
        "confidence": 0.6,
        "method": "incident_review",
        "edge_id": PAGER_EDGE,
        "evidence": [{"event_seq": outage.seq, "event_hash": outage.hash, "citation": outage.citation}],
    }
    assert log.add("causal.edge.generated", direct).seq == DIRECT_AT
    log.add("inference.edge.retracted", {"edge_id": PAGER_EDGE, "reason": "the pager storm was a drill"})
    assert log.events[-1].seq == RETRACTED_AT
    return log


def ask(name: str, direction: Direction, **options: object) -> CausalRequest:
    return msgspec.convert(
        {"session": SESSION, "name": name, "direction": direction, **options}, CausalRequest
    )


def walked(chain: CausalChain) -> list[tuple[int, str, str]]:
    return [(step.depth, step.cause.name, step.effect.name) for step in chain.steps]


async def test_successors_follow_the_chain_hop_by_hop(graph_store: GraphStore) -> None:
    log = causal_story()
    await project(graph_store, log.events)
    one = await graph_store.read(causal_chain(ask(SKIPPED, "successors", depth=1)))
    assert [(e.name, e.entity_type) for e in one.start] == [(SKIPPED, "decision")]
    assert walked(one) == [(1, SKIPPED, DRIFT)]
    two = await graph_store.read(causal_chain(ask(SKIPPED, "successors", depth=2)))
    assert walked(two) == [(1, SKIPPED, DRIFT), (2, DRIFT, OUTAGE)]
    first = two.steps[0]
    assert (first.relation_type, first.confidence, first.inference_method) == (
        "causal_caused",
        0.8,
        "outcome_explained_citation_v1",
    )
    assert (first.review_status, first.authority_status, first.authoritative) == (
        "proposed",
        "non_authoritative",
        False,
    )
    assert (first.cause.entity_type, first.effect.entity_type) == ("decision", "outcome")
    assert first.edge_id is not None and first.edge_id.startswith("causal-")
    assert (first.valid_from, first.valid_to) == (ts(3), None)
    decision, drift, edge = log.events[0], log.events[1], log.events[2]
    assert [c.uri for c in first.citations] == [edge.citation, decision.citation, drift.citation]
    assert [(c.seq, c.hash) for c in first.citations] == [
        (edge.seq, edge.hash),
        (decision.seq, decision.hash),
        (drift.seq, drift.hash),
    ]
    assert not two.truncated
    assert walked(await graph_store.read(causal_chain(ask(SKIPPED, "successors")))) == walked(two)


async def test_predecessors_walk_the_edges_backwards(graph_store: GraphStore) -> None:
    await project(graph_store, causal_story().events)
    back = await graph_store.read(causal_chain(ask(OUTAGE, "predecessors")))
    assert [(e.name, e.entity_type) for e in back.start] == [(OUTAGE, "cause"), (OUTAGE, "outcome")]
    assert walked(back) == [(1, DRIFT, OUTAGE), (2, SKIPPED, DRIFT)]
    root = await graph_store.read(causal_chain(ask(SKIPPED, "predecessors")))
    assert [e.name for e in root.start] == [SKIPPED] and root.steps == []
    unknown = await graph_store.read(causal_chain(ask("no such thing", "successors")))
    assert (unknown.start, unknown.steps, unknown.truncated) == ([], [], False)
    typed = await graph_store.read(causal_chain(ask(DRIFT, "successors", entity_type="outcome")))
    assert [e.entity_type for e in typed.start] == ["outcome"]
    assert walked(typed) == [(1, DRIFT, OUTAGE)]  # from the outcome B on through the cause B
    untyped = await graph_store.read(causal_chain(ask(DRIFT, "successors", entity_type="task")))
    assert (untyped.start, untyped.steps) == ([], [])


async def test_names_resolve_like_search_and_unknown_ones_offer_the_closest(graph_store: GraphStore) -> None:
    """Issue 17, defect 5: case, a part of the name, and "did you mean" for the rest."""
    await project(graph_store, causal_story().events)
    shouted = await graph_store.read(causal_chain(ask("LOGIN OUTAGE", "predecessors")))
    assert shouted.resolved_name == OUTAGE and walked(shouted) == [(1, DRIFT, OUTAGE), (2, SKIPPED, DRIFT)]
    partial = await graph_store.read(causal_chain(ask("SKIP-MIG", "successors", depth=1)))
    assert partial.resolved_name == SKIPPED and walked(partial) == [(1, SKIPPED, DRIFT)]
    exact = await graph_store.read(causal_chain(ask(OUTAGE, "predecessors")))
    assert exact.resolved_name is None and exact.suggestions == []
    ambiguous = await graph_store.read(causal_chain(ask("s", "successors")))  # in several names
    assert ambiguous.start == [] and len(ambiguous.suggestions) >= 2
    typo = await graph_store.read(causal_chain(ask("login outgae", "successors")))
    assert typo.start == [] and typo.suggestions[0] == OUTAGE


async def test_a_retracted_edge_is_gone_now_but_held_before(graph_store: GraphStore) -> None:
    log = causal_story()
    await project(graph_store, log.events)
    now = await graph_store.read(causal_chain(ask(OUTAGE, "successors")))
    assert now.steps == []
    before = ts(RETRACTED_AT - 0.5)
    then = await graph_store.read(causal_chain(ask(OUTAGE, "successors", as_of=before)))
    (pager,) = then.steps
    assert (pager.cause.name, pager.effect.name, pager.edge_id) == (OUTAGE, PAGER, PAGER_EDGE)
    assert (pager.valid_from, pager.valid_to) == (ts(DIRECT_AT), ts(RETRACTED_AT))
    assert (pager.confidence, pager.inference_method) == (0.6, "incident_review")
    assert [c.uri for c in pager.citations] == [log.events[DIRECT_AT - 1].citation, log.events[3].citation]
    whole = await graph_store.read(causal_chain(ask(PAGER, "predecessors", as_of=before)))
    assert walked(whole) == [(1, OUTAGE, PAGER), (2, DRIFT, OUTAGE), (3, SKIPPED, DRIFT)]
    assert walked(await graph_store.read(causal_chain(ask(PAGER, "predecessors")))) == []
    early = await graph_store.read(causal_chain(ask(SKIPPED, "successors", as_of=ts(4))))
    assert walked(early) == [(1, SKIPPED, DRIFT)]  # B caused C only from event 5 on


def edge(cause: str, effect: str, confidence: float, cited: Event) -> dict[str, object]:
    return {
        "cause": cause,
        "effect": effect,
        "taxonomy": "enabled",
        "relation_type": "causal_enabled",
        "confidence": confidence,
        "method": "test",
        "evidence": [{"event_seq": cited.seq, "event_hash": cited.hash}],
    }


async def test_cycles_end_and_each_hop_keeps_the_most_confident_edges(graph_store: GraphStore) -> None:
    log = SessionLog(SESSION)
    seen = log.add("transcript.turn", {"role": "user", "text": "x enabled y, y enabled x and z"})
    log.add("causal.edge.generated", edge("x", "y", 0.5, seen))
    log.add("causal.edge.generated", edge("y", "x", 0.5, seen))
    log.add("causal.edge.generated", edge("y", "z", 0.5, seen))
    for n, confidence in enumerate((0.3, 0.9, 0.6)):
        log.add("causal.edge.generated", edge("hub", f"leaf{n}", confidence, seen))
    await project(graph_store, log.events)
    loop = await graph_store.read(causal_chain(ask("x", "successors", depth=5)))
    assert walked(loop) == [(1, "x", "y"), (2, "y", "z")]
    assert [step.relation_type for step in loop.steps] == ["causal_enabled", "causal_enabled"]
    capped = await graph_store.read(causal_chain(ask("hub", "successors", limit=2)))
    assert [(s.effect.name, s.confidence) for s in capped.steps] == [("leaf1", 0.9), ("leaf2", 0.6)]
    assert capped.truncated
    assert not (await graph_store.read(causal_chain(ask("hub", "successors", limit=3)))).truncated


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("depth", 6),
        ("depth", 0),
        ("limit", 0),
        ("limit", 101),
        ("as_of", "2026-13-45T99:00:00Z"),
        ("as_of", "yesterday"),
        ("name", ""),
        ("name", "n" * 513),
        ("session", "has space"),
        ("entity_type", "Outcome"),
        ("direction", "sideways"),
    ],
)
def test_bad_input_names_the_field(field: str, value: object) -> None:
    request = {"session": SESSION, "name": DRIFT, "direction": "successors", field: value}
    with pytest.raises(QueryError, match=f"^{field}: "):
        CausalRequest(**request)  # type: ignore[arg-type]


async def test_local_memory_without_a_graph_is_unavailable() -> None:
    with pytest.raises(MemoryUnavailableError, match="graph"):
        await LocalMemory(ReadModels).causal(ask(DRIFT, "successors"))


async def serving(log: EventLog, memory: LocalMemory) -> AsyncIterator[None]:
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(serve_memory(log.client, memory, stop, ready))
    await asyncio.wait_for(ready.wait(), 10)
    try:
        yield
    finally:
        stop.set()
        await task


async def test_the_service_the_client_and_the_cli_answer_like_local_memory(
    graph_store: GraphStore, log: EventLog, settings: Settings
) -> None:
    await project(graph_store, causal_story().events)
    local = LocalMemory(lambda: ReadModels(graph=graph_store))
    client = MemoryClient(log.client)
    requests = [
        ask(SKIPPED, "successors", depth=2),
        ask(OUTAGE, "predecessors"),
        ask(OUTAGE, "successors", as_of=ts(RETRACTED_AT - 0.5)),
        ask("no such thing", "predecessors"),
    ]
    async for _ in serving(log, local):
        for request in requests:
            expected = await local.causal(request)
            assert await client.causal(request) == expected
            raw = await log.client.request(
                SUBJECT_PREFIX + "causal", msgspec.json.encode(request), timeout=10
            )
            reply = msgspec.json.decode(raw.data, type=Reply)
            assert reply.error is None and reply.result == msgspec.to_builtins(expected)
        bad = {"session": SESSION, "name": DRIFT, "direction": "successors", "depth": 6}
        raw = await log.client.request(SUBJECT_PREFIX + "causal", msgspec.json.encode(bad), timeout=10)
        error = msgspec.json.decode(raw.data, type=Reply).error
        assert error is not None and error.code == "invalid_input" and "depth" in error.message

        args = ("memory", "causal", "successors", SKIPPED, "--session", SESSION, "--depth", "2")
        printed = await asyncio.to_thread(run_cli, settings, *args, "--json")
        assert printed.returncode == 0, printed.stderr
        chain = msgspec.convert(json.loads(printed.stdout), CausalChain)
        assert chain == await local.causal(ask(SKIPPED, "successors", depth=2))
        tree = await asyncio.to_thread(run_cli, settings, *args)
        assert tree.returncode == 0, tree.stderr
        assert f"1. {DRIFT} (outcome)" in tree.stdout and f"2. {OUTAGE} (outcome)" in tree.stdout
        assert "2 causal step(s), not authoritative" in tree.stderr
        back = ("memory", "causal", "predecessors", OUTAGE, "--session", SESSION, "--type", "outcome")
        typed = await asyncio.to_thread(run_cli, settings, *back, "--json")
        assert typed.returncode == 0, typed.stderr
        assert [s["cause"]["name"] for s in json.loads(typed.stdout)["steps"]] == [DRIFT, SKIPPED]
        partial = ("memory", "causal", "predecessors", "login OUTAGE", "--session", SESSION)
        matched = await asyncio.to_thread(run_cli, settings, *partial)
        assert matched.returncode == 0 and f"matched {OUTAGE!r}" in matched.stderr, matched.stderr
        unknown = ("memory", "causal", "predecessors", "login outgae", "--session", SESSION)
        missing = await asyncio.to_thread(run_cli, settings, *unknown)
        assert missing.returncode == 1 and f"did you mean: {OUTAGE!r}" in missing.stderr, missing.stderr
        missing_json = await asyncio.to_thread(run_cli, settings, *unknown, "--json")
        assert missing_json.returncode == 1 and json.loads(missing_json.stdout)["suggestions"][0] == OUTAGE
        for option, value in (("--depth", "6"), ("--limit", "0"), ("--as-of", "soon")):
            refused = await asyncio.to_thread(run_cli, settings, *args, option, value)
            assert refused.returncode == 2 and option.strip("-").replace("-", "_") in refused.stderr


async def test_without_a_graph_the_client_is_told_unavailable(log: EventLog) -> None:
    async for _ in serving(log, LocalMemory(ReadModels)):
        with pytest.raises(MemoryUnavailableError, match="graph read model"):
            await MemoryClient(log.client).causal(ask(DRIFT, "successors"))


@pytest.fixture
async def causal_node(settings: Settings) -> AsyncIterator[Node]:
    """A node projecting the graph and running the `causal` producer, as `eventloom up` does."""
    async for running in start_node(replace(settings, projectors="graph", producers="causal")):
        yield running


async def test_through_the_node_the_producer_links_the_chain(causal_node: Node, log: EventLog) -> None:
    decision = await log.append(
        SESSION, "decision.made", "agent:a", {"decision_id": SKIPPED, "title": "Skip"}
    )
    drift = await log.append(
        SESSION, "outcome.explained", "agent:a", explained(DRIFT, SKIPPED_LINE, decision.seq, decision.hash)
    )
    await log.append(SESSION, "outcome.explained", "agent:a", explained(OUTAGE, DRIFT, drift.seq, drift.hash))
    await log.append(  # cites an event that is not in the log: the runtime refuses to derive from it
        SESSION, "outcome.explained", "agent:a", explained("pager storm", OUTAGE, drift.seq, "0" * 64)
    )
    await drained(log, "producer-causal", timeout=60)
    await drained(log, "projector-graph", timeout=60)
    memory = MemoryClient(log.client)
    forward = await memory.causal(ask(SKIPPED, "successors", depth=5))
    assert walked(forward) == [(1, SKIPPED, DRIFT), (2, DRIFT, OUTAGE)]
    assert forward.steps[0].citations[1].uri == decision.citation
    backward = await memory.causal(ask(OUTAGE, "predecessors"))
    assert walked(backward) == [(1, DRIFT, OUTAGE), (2, SKIPPED, DRIFT)]
