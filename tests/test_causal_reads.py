"""Causal edges attach to the entity their cited event is about, and the causal reads `path` and `explain`,
on LadybugDB and Neo4j (issue 20, items 4 and 5).

The story: a decision shrank the connection pool; that caused pool exhaustion (explained, citing the
decision), which caused the outage of auth-service (explained, citing the first explanation, and `about`
auth-service). The `causal` producer derives both edges from the log, reading each cited cause event."""

from __future__ import annotations

import asyncio
import json

import msgspec
import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.producers import CausalProducer, DecisionCitationProducer
from readmodels.graph.protocol import GraphStore
from readmodels.query.client import MemoryClient
from readmodels.query.local import LocalMemory
from readmodels.retrieval.causal_reads import (
    CausalExplainRequest,
    CausalExplanation,
    CausalPathRequest,
    CausalPaths,
    causal_explanation,
    causal_paths,
)
from readmodels.retrieval.model import QueryError
from readmodels.retrieval.read_models import ReadModels
from tests import test_graph_support as support
from tests.causal_support import processed
from tests.conftest import run_cli
from tests.test_causal import serving
from tests.test_graph_support import SessionLog

pytestmark = pytest.mark.anyio
backend = support.backend
graph_store = support.graph_store
fresh_store = support.fresh_store

SESSION = "a1"
DECISION = "dec-pool"
EXHAUSTION = "Pool exhaustion"
OUTAGE = "Outage of auth-service"
AUTH = ("auth-service", "service")


def explained(outcome: str, cause: Event, about: tuple[str, str] | None = None) -> dict[str, object]:
    payload: dict[str, object] = {
        "outcome": outcome,
        "explanation": f"{outcome}: because of {cause.type} {cause.seq}",
        "taxonomy": "caused",
        "cause": f"what event {cause.seq} says",
        "cause_event_seq": cause.seq,
        "cause_event_hash": cause.hash,
    }
    if about is not None:
        payload["about"] = [{"name": about[0], "entity_type": about[1]}]
    return payload


async def derive(log: SessionLog, producer: CausalProducer | DecisionCitationProducer) -> Event:
    (derived,) = await processed(producer, log.events)
    return log.add(derived.type, derived.payload)


async def outage_story() -> SessionLog:
    log = SessionLog(SESSION)
    decision = log.add("decision.made", {"decision_id": DECISION, "title": "Shrink the DB connection pool"})
    exhaustion = log.add("outcome.explained", explained(EXHAUSTION, decision))
    await derive(log, CausalProducer())
    log.add("outcome.explained", explained(OUTAGE, exhaustion, about=AUTH))
    await derive(log, CausalProducer())
    log.add("task.proposed", {"task_id": "t-revert", "title": "Restore the pool"})
    completed = {
        "task_id": "t-revert",
        "decision": "Shrink the DB connection pool",
        "decision_event_seq": decision.seq,
        "decision_event_hash": decision.hash,
    }
    log.add("task.completed", completed)
    await derive(log, DecisionCitationProducer())
    about = [{"name": AUTH[0], "entity_type": AUTH[1]}]
    log.add("decision.made", {"decision_id": "dec-revert", "title": "Restore the pool", "about": about})
    return log


async def test_the_producers_attach_to_what_the_cited_event_is_about() -> None:
    log = await outage_story()
    first, second = (e.payload for e in log.events if e.type == "causal.edge.generated")
    assert first["cause_entity"] == {"name": DECISION, "entity_type": "decision"}
    assert first["effect_entity"] == {"name": EXHAUSTION, "entity_type": "outcome"}
    assert second["cause_entity"] == {"name": EXHAUSTION, "entity_type": "outcome"}
    (inferred,) = (e.payload for e in log.events if e.type == "inference.edge.generated")
    assert (inferred["source"], inferred["target"]) == ("t-revert", DECISION)

    issue = SessionLog("b1")
    diagnosed = issue.add("issue.diagnosed", {"issue_id": "iss-1", "summary": "Pool too small"})
    issue.add("outcome.explained", explained("Slow logins", diagnosed))
    (edge,) = await processed(CausalProducer(), issue.events)
    assert edge.payload["cause_entity"] == {"name": "iss-1", "entity_type": "issue"}
    task = SessionLog("b2")
    claimed = task.add("task.claimed", {"taskId": "t-9", "assignee": "agent-a"})
    task.add("outcome.explained", explained("Slow logins", claimed))
    (edge,) = await processed(CausalProducer(), task.events)
    assert edge.payload["cause_entity"] == {"name": "t-9", "entity_type": "task"}
    other = SessionLog("b3")
    turn = other.add("transcript.turn", {"role": "user", "text": "the pool is tiny"})
    other.add("outcome.explained", explained("Slow logins", turn))
    (edge,) = await processed(CausalProducer(), other.events)
    assert "cause_entity" not in edge.payload  # falls back to an entity named by the cause line
    (unseen,) = await processed(CausalProducer(), other.events[-1:])  # the cause is not in the log:
    assert "cause_entity" not in unseen.payload and unseen.requires  # the runtime will not emit it


async def test_from_auth_service_traversal_reaches_the_causal_edge_and_its_cause_decision(
    graph_store: GraphStore,
) -> None:
    log = await outage_story()
    await support.project(graph_store, log.events)
    reached = {
        (n.entity.name, n.entity.entity_type): n
        for n in await graph_store.neighbours(SESSION, *AUTH, depth=3, include_inferred=True)
    }
    assert reached[(OUTAGE, "outcome")].via.relation_type == "concerns"
    assert reached[(EXHAUSTION, "outcome")].via.relation_type == "causal_caused"
    assert (DECISION, "decision") in reached
    assert reached[("dec-revert", "decision")].via.relation_type == "concerns"
    (implemented,) = await graph_store.relations(SESSION, relation_type="likely_implemented_decision")
    assert (implemented.target_name, implemented.target_entity_type) == (DECISION, "decision")
    causal = await graph_store.relations(SESSION, relation_type="causal_caused")
    assert {(e.source_name, e.source_entity_type) for e in causal} == {
        (DECISION, "decision"),
        (EXHAUSTION, "outcome"),
    }


async def test_explain_an_outcome_or_what_it_concerns(graph_store: GraphStore) -> None:
    log = await outage_story()
    await support.project(graph_store, log.events)
    why = await graph_store.read(
        causal_explanation(CausalExplainRequest(session=SESSION, name="auth-service"))
    )
    assert [(o.name, o.entity_type) for o in why.outcomes] == [(OUTAGE, "outcome")]
    assert [(s.depth, s.cause.name, s.effect.name) for s in why.steps] == [
        (1, EXHAUSTION, OUTAGE),
        (2, DECISION, EXHAUSTION),
    ]
    assert why.steps[1].cause.summary == "Shrink the DB connection pool"
    assert why.steps[1].citations[0].uri == log.events[2].citation  # the edge's own event
    assert [(x.outcome, x.taxonomy) for x in why.explanations] == [(EXHAUSTION, "caused"), (OUTAGE, "caused")]
    outage = why.explanations[1]
    assert [c.uri for c in outage.citations] == [log.events[3].citation, log.events[1].citation]
    assert outage.explanation is not None and outage.explanation.startswith(OUTAGE)
    direct = await graph_store.read(causal_explanation(CausalExplainRequest(session=SESSION, name="outage")))
    assert direct.resolved_name == OUTAGE and direct.steps == why.steps
    shallow = CausalExplainRequest(session=SESSION, name=OUTAGE, depth=1)
    assert len((await graph_store.read(causal_explanation(shallow))).steps) == 1
    unknown = await graph_store.read(
        causal_explanation(CausalExplainRequest(session=SESSION, name="auth-svc"))
    )
    assert unknown.outcomes == [] and unknown.suggestions


async def test_paths_from_a_cause_to_an_effect(graph_store: GraphStore) -> None:
    log = await outage_story()
    await support.project(graph_store, log.events)
    found = await graph_store.read(
        causal_paths(CausalPathRequest(session=SESSION, source=DECISION, target=OUTAGE))
    )
    (path,) = found.paths
    assert [(s.depth, s.cause.name, s.effect.name) for s in path.steps] == [
        (1, DECISION, EXHAUSTION),
        (2, EXHAUSTION, OUTAGE),
    ]
    assert all(step.citations and not step.authoritative for step in path.steps)
    assert [c.uri for c in path.steps[1].citations][:2] == [log.events[4].citation, log.events[1].citation]
    assert [e.entity_type for e in found.source_entities] == ["decision"] and not found.truncated
    backwards = CausalPathRequest(session=SESSION, source=OUTAGE, target=DECISION)
    assert (await graph_store.read(causal_paths(backwards))).paths == []
    short = CausalPathRequest(session=SESSION, source=DECISION, target=OUTAGE, depth=1)
    assert (await graph_store.read(causal_paths(short))).paths == []
    typo = CausalPathRequest(session=SESSION, source="dec-poo", target="nothing like it at all")
    missed = await graph_store.read(causal_paths(typo))
    assert missed.paths == [] and missed.resolved_source == DECISION and "source" not in missed.suggestions


@pytest.mark.parametrize(
    ("request_type", "field", "value"),
    [
        (CausalPathRequest, "depth", 6),
        (CausalPathRequest, "limit", 21),
        (CausalPathRequest, "source", ""),
        (CausalPathRequest, "target", "t" * 513),
        (CausalPathRequest, "as_of", "soon"),
        (CausalExplainRequest, "depth", 0),
        (CausalExplainRequest, "name", " "),
        (CausalExplainRequest, "entity_type", "Service"),
        (CausalExplainRequest, "session", "a b"),
    ],
)
def test_bad_input_names_the_field(request_type: type, field: str, value: object) -> None:
    fields: dict[str, object] = {"session": SESSION}
    fields.update({"source": "a", "target": "b"} if request_type is CausalPathRequest else {"name": "x"})
    fields[field] = value
    with pytest.raises(QueryError, match=f"^{field}: "):
        request_type(**fields)


async def test_the_service_the_client_and_the_cli_answer_like_local_memory(
    graph_store: GraphStore, log: EventLog, settings: Settings
) -> None:
    await support.project(graph_store, (await outage_story()).events)
    local = LocalMemory(lambda: ReadModels(graph=graph_store))
    client = MemoryClient(log.client)
    path = CausalPathRequest(session=SESSION, source=DECISION, target="outage")
    why = CausalExplainRequest(session=SESSION, name="auth-service")
    async for _ in serving(log, local):
        assert await client.causal_path(path) == await local.causal_path(path)
        assert await client.causal_explain(why) == await local.causal_explain(why)
        args = ("memory", "causal", "path", DECISION, "outage", "--session", SESSION, "--json")
        printed = await asyncio.to_thread(run_cli, settings, *args)
        assert printed.returncode == 0, printed.stderr
        assert msgspec.convert(json.loads(printed.stdout), CausalPaths) == await local.causal_path(path)
        text = await asyncio.to_thread(run_cli, settings, *args[:-1])
        assert text.returncode == 0 and "2. Outage of auth-service (outcome)" in text.stdout, text.stderr
        assert "1 causal path(s), not authoritative" in text.stderr
        explain = ("memory", "causal", "explain", "auth-service", "--session", SESSION)
        explained_json = await asyncio.to_thread(run_cli, settings, *explain, "--json")
        assert explained_json.returncode == 0, explained_json.stderr
        decoded = msgspec.convert(json.loads(explained_json.stdout), CausalExplanation)
        assert decoded == await local.causal_explain(why)
        text = await asyncio.to_thread(run_cli, settings, *explain)
        assert text.returncode == 0 and f"outcomes explained: {OUTAGE}" in text.stdout
        assert "2. dec-pool (decision): Shrink the DB connection pool" in text.stdout
        missing = await asyncio.to_thread(
            run_cli, settings, "memory", "causal", "explain", "auth-svc", "--session", SESSION
        )
        assert missing.returncode == 1 and "did you mean" in missing.stderr
        refused = await asyncio.to_thread(run_cli, settings, *explain, "--depth", "9")
        assert refused.returncode == 2 and "depth" in refused.stderr
