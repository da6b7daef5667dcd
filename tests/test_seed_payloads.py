"""The design's payloads (tests/fixtures/seed_payloads.json, from syndicalt/zaxy) are accepted by a real
append, stored unchanged, and read by every consumer as the current shape: the graph (both backends), the
inferred-edge model, the citation check, the keyword and vector documents, the causal producer.

The story appends the events the design payloads cite (a decision, the task that carried it out, a failing
command) and puts their real seq and hash where a design example cites made-up ones.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

from eventloom.citations import CitationChecker
from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.schemas import current_payload, decode_payload, schema_for, validate_payload
from eventloom.schemas.catalogue import ConsolidationCandidateCreated
from eventloom.schemas.catalogue_seed import UNSTATED_PURPOSE
from projectors.graph.registry import extract
from projectors.inferred.extract import inferred_changes
from projectors.memory_docs import memory_docs
from projectors.producers.causal import CausalProducer
from readmodels.graph.protocol import GraphStore
from tests import test_graph_support as support
from tests.conftest import REPO
from tests.test_citations import lookup_in
from tests.test_graph_support import SessionLog, project

pytestmark = pytest.mark.anyio
backend = support.backend  # the graph fixtures, parametrized by backend
graph_store = support.graph_store
fresh_store = support.fresh_store

FIXTURE = json.loads((REPO / "tests" / "fixtures" / "seed_payloads.json").read_text(encoding="utf-8"))
SEEDS: dict[str, dict[str, Any]] = {entry["name"]: entry for entry in FIXTURE["payloads"]}
SESSION = "seeds"
DECISION = "Use Memory Checkout as the model-facing state contract"
REVIEWER = "reviewer:alice"


def seed(name: str) -> dict[str, Any]:
    payload: dict[str, Any] = copy.deepcopy(SEEDS[name]["payload"])
    return payload


def citing(name: str, **cited: Any) -> dict[str, Any]:
    """The seed payload with its evidence object naming the events of the story (`cited`)."""
    payload = seed(name)
    payload["evidence"].update(cited)
    return payload


async def story(log: EventLog) -> dict[str, Event]:
    """The cited events, then each seed payload (by its fixture name), appended through the real log."""
    decision = await log.append(
        SESSION, "decision.made", "agent:a", {"decision_id": "dec-1", "title": DECISION}
    )
    task = await log.append(
        SESSION,
        "task.completed",
        "agent:a",
        {"task_id": "task-7", "decision_event_seq": decision.seq, "decision_event_hash": decision.hash},
    )
    command = await log.append(SESSION, "command.completed", "agent:a", {"command": "pytest", "exit_code": 1})
    on_command = {"source_event_seq": command.seq, "source_event_hash": command.hash}
    on_task = {"source_event_seq": task.seq, "source_event_hash": task.hash}
    candidate = seed("alpha_consolidation_candidate")
    candidate["source_events"] = [{"seq": command.seq, "hash": command.hash}]
    payloads = {
        "graph_schema_inference_edge": seed("graph_schema_inference_edge"),  # seq 6676 alone: no citation
        "task_decision_inference_edge": citing(
            "task_decision_inference_edge",
            **on_task,
            decision_event_seq=decision.seq,
            decision_event_hash=decision.hash,
        ),
        "alpha_causal_edge": citing("alpha_causal_edge", **on_command),
        "alpha_outcome_explained": citing("alpha_outcome_explained", **on_command),
        "alpha_consolidation_candidate": candidate,
        "alpha_consolidation_review": seed("alpha_consolidation_review"),
    }
    events = {"decision": decision, "task": task, "command": command}
    for name, payload in payloads.items():
        events[name] = await log.append(SESSION, SEEDS[name]["type"], REVIEWER, payload)
    return events


def test_the_fixture_holds_the_five_types_literally_with_their_sources() -> None:
    assert {entry["type"] for entry in SEEDS.values()} == {
        "inference.edge.generated",
        "causal.edge.generated",
        "outcome.explained",
        "consolidation.candidate.created",
        "consolidation.candidate.reviewed",
    }
    assert all("syndicalt/zaxy" in FIXTURE["_comment"] and entry["source"] for entry in SEEDS.values())
    assert SEEDS["graph_schema_inference_edge"]["payload"]["inference_method"] == "operator_review_v1"


async def test_each_is_accepted_stored_unchanged_and_read_in_the_current_shape(log: EventLog) -> None:
    events = await story(log)
    stored = {event.seq: event for event in [e async for e in log.events(SESSION)]}
    for name, entry in SEEDS.items():
        event = stored[events[name].seq]
        assert event.payload == events[name].payload and event.type == entry["type"]
        assert type(decode_payload(event.type, event.payload)).__name__.endswith("Seed"), name
        assert isinstance(current_payload(event), schema_for(event.type)), name  # type: ignore[arg-type]


async def test_the_seeds_project_the_edges_and_entities_the_current_shape_does(
    log: EventLog, graph_store: GraphStore
) -> None:
    events = await story(log)
    ordered = sorted(events.values(), key=lambda event: event.seq)
    assert await project(graph_store, ordered) == len(ordered)
    edges = {edge.relation_type: edge for edge in await graph_store.relations(SESSION)}
    implemented = edges["likely_implemented_decision"]
    task, decision, command = events["task"], events["decision"], events["command"]
    assert (implemented.source_name, implemented.source_entity_type) == ("task-7", "task")
    assert (implemented.target_name, implemented.target_entity_type) == (DECISION, "decision")
    assert (implemented.inferred, implemented.confidence) == (True, 0.86)
    assert implemented.inference_method == "task_completed_decision_citation_v1"
    assert implemented.evidence_event_hashes == [task.hash, decision.hash]
    assert implemented.evidence_event_seqs == [task.seq, decision.seq]
    assert implemented.derived_from_event_seq == task.seq
    informed = edges["likely_informed"]
    assert (informed.confidence, informed.inference_method, informed.evidence_event_seqs) == (
        0.82,
        "operator_review_v1",
        [6676],
    )
    assert informed.evidence_quotes == ["Operator confirmed the task led to the decision."]
    causal = edges["causal_caused"]
    assert (causal.source_name, causal.source_entity_type) == ("command:pytest", "command")
    assert (causal.target_name, causal.target_entity_type) == ("test failure", "outcome")
    assert (causal.confidence, causal.inference_method) == (0.91, "explicit_outcome_citation_v1")
    assert (causal.review_status, causal.authority_status) == ("proposed", "non_authoritative")
    assert causal.evidence_event_hashes == [command.hash]
    assert edges["explained_by"].target_name == "command:pytest"
    (outcome,) = await graph_store.entities(SESSION, entity_type="outcome")
    assert outcome.summary == "The command output contained the failure."
    (candidate,) = await graph_store.entities(SESSION, entity_type="consolidation_candidate")
    assert candidate.name == "consolidation:episode:abc123"
    assert (candidate.properties["status"], candidate.properties["reviewer"]) == ("accepted", REVIEWER)
    assert candidate.properties["source_events"] == [
        {"session": SESSION, "seq": command.seq, "hash": command.hash}
    ]


CURRENT_SHAPES: dict[str, Any] = {
    "graph_schema_inference_edge": lambda e: {
        "source": "task-7",
        "target": DECISION,
        "relation_type": "likely_informed",
        "confidence": 0.82,
        "method": "operator_review_v1",
        "source_entity": {"name": "task-7", "entity_type": "task"},
        "target_entity": {"name": DECISION, "entity_type": "decision"},
        "source_event_seq": 6676,
        "evidence": [{"event_seq": 6676, "quote": "Operator confirmed the task led to the decision."}],
    },
    "alpha_causal_edge": lambda e: {
        "cause": "command:pytest",
        "effect": "test failure",
        "taxonomy": "caused",
        "relation_type": "causal_caused",
        "confidence": 0.91,
        "method": "explicit_outcome_citation_v1",
        "evidence": [
            {
                "event_seq": e["command"].seq,
                "event_hash": e["command"].hash,
                "quote": "The command output contained the failure.",
            }
        ],
        "source_event_seq": e["command"].seq,
        "source_event_hash": e["command"].hash,
        "cause_entity": {"name": "command:pytest", "entity_type": "command"},
        "effect_entity": {"name": "test failure", "entity_type": "outcome"},
    },
    "alpha_outcome_explained": lambda e: {
        "outcome": "test failure",
        "explanation": "The command output contained the failure.",
        "taxonomy": "caused",
        "cause": "command:pytest",
        "cause_event_seq": e["command"].seq,
        "cause_event_hash": e["command"].hash,
        "confidence": 0.92,
        "evidence": [
            {
                "event_seq": e["command"].seq,
                "event_hash": e["command"].hash,
                "quote": "The command output contained the failure.",
            }
        ],
    },
    "alpha_consolidation_candidate": lambda e: {
        **{k: v for k, v in seed("alpha_consolidation_candidate").items() if not k.endswith("_status")},
        "source_events": [{"session": SESSION, "seq": e["command"].seq, "hash": e["command"].hash}],
    },
    "alpha_consolidation_review": lambda e: {
        "candidate_id": "consolidation:episode:abc123",
        "decision": "accepted",
        "reviewer": REVIEWER,
        "rationale": "Useful but still alpha.1 non-authoritative.",
    },
}
"""What each seed payload says in the current shape, written out by hand (docs/event-types.md's mapping)."""


@pytest.mark.parametrize("name", sorted(CURRENT_SHAPES))
async def test_a_seed_is_read_everywhere_exactly_as_its_current_shape(log: EventLog, name: str) -> None:
    events = await story(log)
    design = events[name]
    current = msgspec.structs.replace(design, payload=CURRENT_SHAPES[name](events))
    validate_payload(current.type, current.payload)
    assert extract(design).ops == extract(current).ops
    assert inferred_changes(design) == inferred_changes(current)
    assert memory_docs(design).docs == memory_docs(current).docs
    assert current_payload(design) == current_payload(current)


async def test_seed_citations_are_checked_against_the_log(log: EventLog) -> None:
    events = await story(log)
    checker = CitationChecker(lookup_in(list(events.values())))
    for name in SEEDS:
        assert await checker.problem(events[name]) is None, name
    forged = citing("alpha_causal_edge", source_event_seq=events["command"].seq, source_event_hash="f" * 64)
    refused = await log.append(SESSION, "causal.edge.generated", "agent:a", forged)  # the shape is fine
    problem = await CitationChecker(lookup_in([*events.values(), refused])).problem(refused)
    assert problem is not None and problem.startswith("uncited") and "evidence[0]" in problem


async def test_the_causal_producer_derives_an_edge_from_a_seed_explanation(log: EventLog) -> None:
    events = await story(log)
    (derived,) = CausalProducer().derive(events["alpha_outcome_explained"], events["command"])
    validate_payload(derived.type, derived.payload)
    assert derived.payload["effect"] == "test failure" and derived.payload["taxonomy"] == "caused"
    assert derived.payload["confidence"] == 0.8  # the producer's ceiling, below the explainer's 0.92
    assert [(c.seq, c.hash) for c in derived.requires] == [(events["command"].seq, events["command"].hash)]


@pytest.mark.parametrize(
    ("name", "change", "field"),
    [
        ("alpha_causal_edge", {"graph_relation_type": "causal_fixed"}, "payload"),
        ("alpha_causal_edge", {"relation_type": "likely_informed"}, "payload.relation_type"),
        ("alpha_causal_edge", {"evidence": {"source_event_seq": 1}}, "payload.evidence.source_event_hash"),
        ("alpha_consolidation_review", {"authority_status": "authoritative"}, "payload.authority_status"),
        ("alpha_consolidation_candidate", {"review_status": "accepted"}, "payload.review_status"),
        ("task_decision_inference_edge", {"confidence": 1.5}, "payload.confidence"),
    ],
)
def test_a_broken_seed_is_refused_naming_its_own_field(name: str, change: dict[str, Any], field: str) -> None:
    payload = {**seed(name), **change}
    with pytest.raises(EventValidationError) as caught:
        validate_payload(SEEDS[name]["type"], payload)
    assert caught.value.field == field


def test_a_design_candidate_without_purpose_gets_the_unstated_one() -> None:
    payload = {key: value for key, value in seed("alpha_consolidation_candidate").items() if key != "purpose"}
    event = SessionLog(SESSION).add("consolidation.candidate.created", payload)
    upgraded = current_payload(event)
    assert isinstance(upgraded, ConsolidationCandidateCreated) and upgraded.purpose == UNSTATED_PURPOSE
