"""The built-in inference producers: pure derivations, table-driven.

Every derived payload is checked against its registered schema; citations the runtime must verify are
checked to be present (that the runtime honours them is tested with a real log in the runtime tests).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from eventloom.event import Event, canonical_bytes, citation
from eventloom.schemas import schema_for, validate_payload
from projectors.producers import (
    BUILTIN_PRODUCERS,
    CausalProducer,
    DecisionCitationProducer,
    RetractionProducer,
)
from projectors.protocol import CitedEvent, DerivedEvent, Producer

SESSION = "s1"
DECISION_HASH = hashlib.sha256(b"decision").hexdigest()
CAUSE_HASH = hashlib.sha256(b"cause").hexdigest()
_DROP: Any = object()  # marks a field to leave out of a sample payload
TAXONOMIES = ["caused", "enabled", "blocked", "prevented", "regressed", "fixed", "explained"]


def make_event(type_: str, payload: dict[str, Any], *, seq: int = 10, session: str = SESSION) -> Event:
    """A well-formed event with its real hash (the signature is irrelevant to producers)."""
    fields: dict[str, Any] = {
        "v": 1,
        "session": session,
        "seq": seq,
        "ts": "2025-05-01T12:00:00.000000Z",
        "type": type_,
        "actor": "agent:test",
        "payload": payload,
        "caused_by": [],
        "prev_hash": hashlib.sha256(f"{session}:{seq - 1}".encode()).hexdigest(),
    }
    digest = hashlib.sha256(canonical_bytes(**fields)).hexdigest()
    return Event(**fields, hash=digest, sig="", key_id="0" * 16)


def task_completed(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "task_id": "task-17",
        "summary": "Mirror truncates a torn tail.",
        "decision": "Truncate and re-fetch rather than refuse to start",
        "decision_event_seq": 4,
        "decision_event_hash": DECISION_HASH,
    }
    payload.update(overrides)
    return {key: value for key, value in payload.items() if value is not _DROP}


def contradicted(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"edge_id": "inf-co-7", "reason": "The crash was in the consumer."}
    payload.update(overrides)
    return {key: value for key, value in payload.items() if value is not _DROP}


def explained(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "outcome": "Ledger verification failed after the crash test",
        "explanation": "The last line was written without fsync.",
        "taxonomy": "caused",
        "cause": "Unsynced final write in the ledger mirror",
        "cause_event_seq": 3,
        "cause_event_hash": CAUSE_HASH,
    }
    payload.update(overrides)
    return {key: value for key, value in payload.items() if value is not _DROP}


def only(derived: list[DerivedEvent]) -> DerivedEvent:
    assert len(derived) == 1, derived
    assert schema_for(derived[0].type) is not None, f"{derived[0].type} has no registered schema"
    validate_payload(derived[0].type, derived[0].payload)
    return derived[0]


# --- the set -------------------------------------------------------------------------------------------


def test_builtin_producers_are_producers_named_as_registered() -> None:
    assert set(BUILTIN_PRODUCERS) == {"decision_citation", "retraction", "causal"}
    for name, producer in BUILTIN_PRODUCERS.items():
        assert isinstance(producer, Producer)
        assert producer.name == name


@pytest.mark.parametrize("factory", [DecisionCitationProducer, RetractionProducer, CausalProducer])
def test_each_class_is_an_entry_point_factory(factory: Callable[[object], Producer]) -> None:
    assert isinstance(factory(object()), Producer)


SAMPLES = [
    make_event("task.completed", task_completed()),
    make_event("inference.edge.contradicted", contradicted()),
    make_event("outcome.explained", explained()),
    make_event("decision.made", {"decision_id": "d-1", "title": "Truncate"}),
    make_event("custom.opaque", {"decision_event_seq": 1, "cause_event_hash": CAUSE_HASH}),
]
EXPECTED_TYPES = {
    "decision_citation": {"task.completed": "inference.edge.generated"},
    "retraction": {"inference.edge.contradicted": "inference.edge.retracted"},
    "causal": {"outcome.explained": "causal.edge.generated"},
}


@pytest.mark.parametrize("name", sorted(BUILTIN_PRODUCERS))
@pytest.mark.parametrize("event", SAMPLES, ids=[event.type for event in SAMPLES])
def test_each_producer_reacts_only_to_its_own_type(name: str, event: Event) -> None:
    derived = BUILTIN_PRODUCERS[name].derive(event)
    expected = EXPECTED_TYPES[name].get(event.type)
    if expected is None:
        assert derived == []
    else:
        assert only(derived).type == expected


# --- decision_citation ---------------------------------------------------------------------------------


def test_decision_citation_emits_a_cited_inferred_edge() -> None:
    event = make_event("task.completed", task_completed())
    derived = only(DecisionCitationProducer().derive(event))
    payload = derived.payload
    assert derived.type == "inference.edge.generated"
    assert derived.session is None  # the task's own session
    assert derived.requires == [CitedEvent(SESSION, 4, DECISION_HASH)]
    assert payload["source"] == "task-17"
    assert payload["target"] == "Truncate and re-fetch rather than refuse to start"
    assert payload["relation_type"] == "likely_implemented_decision"
    assert payload["confidence"] == 0.86
    assert payload["method"] == "task_completed_decision_citation_v1"
    assert (payload["source_event_seq"], payload["source_event_hash"]) == (10, event.hash)
    assert payload["evidence"] == [
        {"event_seq": 10, "event_hash": event.hash, "citation": citation(SESSION, 10, event.hash)},
        {
            "event_seq": 4,
            "event_hash": DECISION_HASH,
            "citation": f"eventloom://s1/events/4#{DECISION_HASH[:12]}",
        },
    ]
    assert payload["edge_id"].startswith("inf-")


@pytest.mark.parametrize(
    ("case", "payload", "seq"),
    [
        ("no decision", task_completed(decision=_DROP), 10),
        ("null decision", task_completed(decision=None), 10),
        ("empty decision", task_completed(decision=""), 10),
        ("blank decision", task_completed(decision="   "), 10),
        ("no seq", task_completed(decision_event_seq=_DROP), 10),
        ("null seq", task_completed(decision_event_seq=None), 10),
        ("no hash", task_completed(decision_event_hash=_DROP), 10),
        ("null hash", task_completed(decision_event_hash=None), 10),
        ("no citation at all", task_completed(decision_event_seq=_DROP, decision_event_hash=_DROP), 10),
        ("seq as string", task_completed(decision_event_seq="4"), 10),
        ("seq as bool", task_completed(decision_event_seq=True), 10),
        ("seq as float", task_completed(decision_event_seq=4.0), 10),
        ("seq zero", task_completed(decision_event_seq=0), 10),
        ("hash too short", task_completed(decision_event_hash=DECISION_HASH[:12]), 10),
        ("hash upper case", task_completed(decision_event_hash=DECISION_HASH.upper()), 10),
        ("hash as int", task_completed(decision_event_hash=123), 10),
        ("decision as list", task_completed(decision=["a"]), 10),
        ("no task_id", task_completed(task_id=_DROP), 10),
        ("empty task_id", task_completed(task_id=""), 10),
        ("cites itself", task_completed(decision_event_seq=10), 10),
        ("cites a later event", task_completed(decision_event_seq=11), 10),
    ],
)
def test_decision_citation_emits_nothing_without_a_full_valid_citation(
    case: str, payload: dict[str, Any], seq: int
) -> None:
    assert DecisionCitationProducer().derive(make_event("task.completed", payload, seq=seq)) == [], case


def test_decision_citation_ignores_the_same_fields_on_another_type() -> None:
    assert DecisionCitationProducer().derive(make_event("task.started", task_completed())) == []


def test_decision_citation_fits_a_long_decision_into_a_name() -> None:
    event = make_event("task.completed", task_completed(decision="x" * 5_000))
    target = only(DecisionCitationProducer().derive(event)).payload["target"]
    assert len(target) == 512
    assert target.endswith("\u2026")


# --- retraction ----------------------------------------------------------------------------------------

TRIPLE = {"source": "ledger mirror", "target": "issue-4", "relation_type": "affected_by"}


@pytest.mark.parametrize(
    ("case", "payload", "named"),
    [
        ("by edge_id", contradicted(), {"edge_id": "inf-co-7"}),
        ("by triple", contradicted(edge_id=_DROP, **TRIPLE), TRIPLE),
        ("by both", contradicted(**TRIPLE), {"edge_id": "inf-co-7", **TRIPLE}),
        ("edge_id and a partial triple", contradicted(source="ledger mirror"), {"edge_id": "inf-co-7"}),
        (
            "with confidence and evidence",
            contradicted(confidence=0.8, evidence=[{"quote": "traceback ends in consumer.fetch()"}]),
            {"edge_id": "inf-co-7"},
        ),
    ],
)
def test_retraction_retracts_the_contradicted_edge(
    case: str, payload: dict[str, Any], named: dict[str, str]
) -> None:
    event = make_event("inference.edge.contradicted", payload)
    derived = only(RetractionProducer().derive(event))
    assert derived.type == "inference.edge.retracted", case
    assert derived.requires == []  # it cites only its own source event
    assert derived.payload == {
        **named,
        "reason": "The crash was in the consumer.",
        "retracted_by_event_hash": event.hash,
    }


@pytest.mark.parametrize(
    ("case", "payload"),
    [
        ("no reason", contradicted(reason=_DROP)),
        ("empty reason", contradicted(reason="")),
        ("reason as int", contradicted(reason=3)),
        ("edge unnamed", contradicted(edge_id=_DROP)),
        ("partial triple only", contradicted(edge_id=_DROP, source="a", target="b")),
        (
            "relation not snake_case",
            contradicted(edge_id=_DROP, **{**TRIPLE, "relation_type": "Affected By"}),
        ),
        ("edge_id as int", contradicted(edge_id=7)),
        ("edge_id empty", contradicted(edge_id="")),
    ],
)
def test_retraction_emits_nothing_for_a_malformed_contradiction(case: str, payload: dict[str, Any]) -> None:
    assert RetractionProducer().derive(make_event("inference.edge.contradicted", payload)) == [], case


def test_retraction_ignores_retractions() -> None:
    retracted = make_event("inference.edge.retracted", {"edge_id": "inf-co-7", "reason": "withdrawn"})
    assert RetractionProducer().derive(retracted) == []


# --- causal --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("taxonomy", TAXONOMIES)
def test_causal_proposes_a_cited_edge_per_taxonomy(taxonomy: str) -> None:
    event = make_event("outcome.explained", explained(taxonomy=taxonomy))
    derived = only(CausalProducer().derive(event))
    payload = derived.payload
    assert derived.type == "causal.edge.generated"
    assert derived.requires == [CitedEvent(SESSION, 3, CAUSE_HASH)]
    assert payload["taxonomy"] == taxonomy
    assert payload["relation_type"] == f"causal_{taxonomy}"
    assert payload["cause"] == "Unsynced final write in the ledger mirror"
    assert payload["effect"] == "Ledger verification failed after the crash test"
    assert payload["review_status"] == "proposed"
    assert payload["authority_status"] == "non_authoritative"
    assert payload["method"] == "outcome_explained_citation_v1"
    assert payload["confidence"] == 0.8
    assert (payload["source_event_seq"], payload["source_event_hash"]) == (10, event.hash)
    assert payload["evidence"] == [
        {"event_seq": 3, "event_hash": CAUSE_HASH, "citation": citation(SESSION, 3, CAUSE_HASH)},
        {"event_seq": 10, "event_hash": event.hash, "citation": citation(SESSION, 10, event.hash)},
    ]
    assert payload["edge_id"].startswith("causal-")


@pytest.mark.parametrize(
    ("case", "overrides", "expected"),
    [
        ("explainer unsure", {"confidence": 0.4}, 0.4),
        ("explainer certain", {"confidence": 1.0}, 0.8),
        ("explainer certain as int", {"confidence": 1}, 0.8),
        ("explainer says nothing", {"confidence": None}, 0.8),
    ],
)
def test_causal_confidence_never_exceeds_the_explainer_or_the_ceiling(
    case: str, overrides: dict[str, Any], expected: float
) -> None:
    event = make_event("outcome.explained", explained(**overrides))
    assert only(CausalProducer().derive(event)).payload["confidence"] == expected, case


def test_causal_without_a_cause_line_names_the_cause_event() -> None:
    event = make_event("outcome.explained", explained(cause=_DROP))
    assert only(CausalProducer().derive(event)).payload["cause"] == citation(SESSION, 3, CAUSE_HASH)


def test_causal_keeps_the_explainers_evidence() -> None:
    own = [{"citation": "eventloom://s1/events/3#abc"}, {"event_seq": 2, "quote": "fsync skipped"}]
    event = make_event("outcome.explained", explained(evidence=own))
    assert only(CausalProducer().derive(event)).payload["evidence"][2:] == own


@pytest.mark.parametrize(
    ("case", "payload"),
    [
        ("uncited", explained(cause_event_seq=_DROP, cause_event_hash=_DROP)),
        ("no seq", explained(cause_event_seq=_DROP)),
        ("no hash", explained(cause_event_hash=_DROP)),
        ("null hash", explained(cause_event_hash=None)),
        ("seq as string", explained(cause_event_seq="3")),
        ("seq as bool", explained(cause_event_seq=True)),
        ("hash too short", explained(cause_event_hash=CAUSE_HASH[:12])),
        ("cites itself", explained(cause_event_seq=10)),
        ("cites a later event", explained(cause_event_seq=12)),
        ("unknown taxonomy", explained(taxonomy="correlated")),
        ("no taxonomy", explained(taxonomy=_DROP)),
        ("no outcome", explained(outcome=_DROP)),
        ("no explanation", explained(explanation=_DROP)),
        ("confidence above 1", explained(confidence=1.5)),
        ("malformed evidence", explained(evidence=[{}])),
        ("evidence not a list", explained(evidence={"quote": "x"})),
    ],
)
def test_causal_emits_nothing_for_an_uncited_or_malformed_explanation(
    case: str, payload: dict[str, Any]
) -> None:
    assert CausalProducer().derive(make_event("outcome.explained", payload)) == [], case


# --- determinism and edge ids --------------------------------------------------------------------------

DETERMINISM_CASES = [
    (DecisionCitationProducer(), make_event("task.completed", task_completed())),
    (RetractionProducer(), make_event("inference.edge.contradicted", contradicted(**TRIPLE))),
    (CausalProducer(), make_event("outcome.explained", explained(evidence=[{"quote": "q"}]))),
]


@pytest.mark.parametrize(
    ("producer", "event"), DETERMINISM_CASES, ids=lambda value: getattr(value, "name", "")
)
def test_same_event_same_derivation(producer: Producer, event: Event) -> None:
    first = producer.derive(event)
    again = type(producer)().derive(make_event(event.type, dict(event.payload), seq=event.seq))
    assert first == producer.derive(event) == again
    assert first[0].key  # a stable fence key, independent of list position


def test_edge_ids_are_pinned() -> None:
    """Changing how an edge id is computed would orphan every edge already in a read model."""
    decision = only(DecisionCitationProducer().derive(make_event("task.completed", task_completed())))
    causal = only(CausalProducer().derive(make_event("outcome.explained", explained())))
    # sha256 of the compact JSON list [method, session, source, target], first 32 hex.
    recomputed = hashlib.sha256(
        json.dumps(
            [
                "task_completed_decision_citation_v1",
                SESSION,
                "task-17",
                "Truncate and re-fetch rather than refuse to start",
            ],
            separators=(",", ":"),
        ).encode()
    ).hexdigest()[:32]
    assert decision.payload["edge_id"] == f"inf-{recomputed}" == "inf-f7e93a51266a1138e1a4d1fef861475e"
    assert causal.payload["edge_id"] == "causal-7c7c6fd85571fc2a9f5d170d7291e43e"


def test_the_same_claim_from_a_later_event_names_the_same_edge() -> None:
    producer = DecisionCitationProducer()
    first = only(producer.derive(make_event("task.completed", task_completed(), seq=10)))
    later = only(producer.derive(make_event("task.completed", task_completed(summary="redone"), seq=20)))
    assert first.payload["edge_id"] == later.payload["edge_id"]
    assert first.payload["source_event_seq"] != later.payload["source_event_seq"]


@pytest.mark.parametrize(
    ("case", "changed"),
    [
        ("other session", make_event("task.completed", task_completed(), session="s2")),
        ("other task", make_event("task.completed", task_completed(task_id="task-18"))),
        ("other decision", make_event("task.completed", task_completed(decision="Refuse to start"))),
    ],
)
def test_a_different_claim_names_a_different_edge(case: str, changed: Event) -> None:
    producer = DecisionCitationProducer()
    base = only(producer.derive(make_event("task.completed", task_completed())))
    assert only(producer.derive(changed)).payload["edge_id"] != base.payload["edge_id"], case


@pytest.mark.parametrize(
    ("case", "overrides"),
    [
        ("other taxonomy", {"taxonomy": "fixed"}),
        ("other outcome", {"outcome": "Crash test passes"}),
        ("other cause event", {"cause_event_hash": DECISION_HASH}),
    ],
)
def test_a_different_causal_claim_names_a_different_edge(case: str, overrides: dict[str, Any]) -> None:
    producer = CausalProducer()
    base = only(producer.derive(make_event("outcome.explained", explained())))
    changed = only(producer.derive(make_event("outcome.explained", explained(**overrides))))
    assert changed.payload["edge_id"] != base.payload["edge_id"], case


def test_derive_does_not_mutate_or_alias_the_source_payload() -> None:
    own = [{"quote": "q"}]
    payload = explained(evidence=own)
    event = make_event("outcome.explained", payload)
    derived = only(CausalProducer().derive(event))
    derived.payload["evidence"][2]["quote"] = "changed"
    assert event.payload["evidence"] == [{"quote": "q"}]
