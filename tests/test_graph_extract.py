"""Graph extraction, table-driven: what each built-in event type projects, from its documented example.

The payloads are the examples of docs/event-types.md (parsed by tests/test_event_types.py), so the docs and
the extraction cannot drift apart silently.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from eventloom.event import Event
from eventloom.schemas.catalogue import BUILTIN_EVENT_TYPES
from projectors.graph.registry import BUILTIN_EXTRACTORS, extract, extractor_for, generic, register_extractor
from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EventProjection,
    RelationAssertion,
    RelationInvalidation,
    SourceCitation,
    TaskObservation,
)
from tests.test_event_types import EXAMPLES
from tests.test_graph_support import SessionLog, ts

MIRROR = "eventloom/ledger/mirror.py"
DOC_CHECKSUM = "sha256:2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"


def describe(projection: EventProjection) -> set[str]:
    """Each op as one short line, so expectations read like the graph they describe."""
    lines: set[str] = set()
    for op in projection.ops:
        if isinstance(op, EntityAssertion):
            lines.add(f"entity {op.entity_type}:{op.name}")
        elif isinstance(op, RelationAssertion):
            kind = "inferred" if op.inferred else "relation"
            source = f"{op.source.entity_type or '?'}:{op.source.name}"
            target = f"{op.target.entity_type or '?'}:{op.target.name}"
            lines.add(f"{kind} {source} -{op.relation_type}-> {target}")
        elif isinstance(op, TaskObservation):
            lines.add(f"observe {op.kind} {op.task_id}")
        elif isinstance(op, SourceCitation):
            by = f" by {op.cited_by.entity_type}" if op.cited_by is not None else ""
            lines.add(f"cite {op.path}:{op.line_start}-{op.line_end}{by}")
        elif isinstance(op, EntityInvalidation):
            lines.add(f"invalidate {op.entity_type}:{op.name} at {op.invalid_at}")
        elif isinstance(op, RelationInvalidation):
            lines.add(f"invalidate {op.source} -{op.relation_type}-> {op.target} at {op.invalid_at}")
        elif isinstance(op, EdgeRetraction):
            lines.add(f"retract {op.edge_id or f'{op.source} -{op.relation_type}-> {op.target}'}")
    return lines


EXPECTED: dict[str, set[str]] = {
    "session.started": {"entity agent:claude-code"},
    "session.ended": set(),
    "goal.created": {"entity goal:goal-durable-ledger"},
    "task.proposed": {
        "entity task:task-17",
        "relation task:task-17 -part_of-> goal:goal-durable-ledger",
        "relation task:task-17 -depends_on-> task:task-12",
    },
    "task.claimed": {
        "entity task:task-17",
        "entity agent:claude-code",
        "relation task:task-17 -assigned_to-> agent:claude-code",
    },
    "task.completed": {"entity task:task-17"},
    "decision.made": {
        "entity decision:dec-9",
        "relation decision:dec-9 -decided_for-> task:task-17",
        "relation decision:dec-9 -concerns-> component:ledger mirror",
    },
    "issue.diagnosed": {"entity issue:issue-4", "relation issue:issue-4 -found_in-> task:task-17"},
    "verification.recorded": {
        "entity verification:tests/test_ledger_crash.py",
        "relation verification:tests/test_ledger_crash.py -verifies-> task:task-17",
    },
    "handoff.created": {
        "entity handoff:handoff-1",
        "entity agent:claude-code",
        "entity agent:codex",
        "relation handoff:handoff-1 -handed_off_by-> agent:claude-code",
        "relation handoff:handoff-1 -handed_off_to-> agent:codex",
        "relation handoff:handoff-1 -includes_task-> task:task-18",
        "relation handoff:handoff-1 -includes_task-> task:task-21",
    },
    "user.preference_changed": {"entity preference:code_style.line_length@repo:eventloom"},
    "hook.checkpoint": {"entity checkpoint:before-stop", "observe HAS_CHECKPOINT task-17"},
    "command.completed": {
        "entity command:pytest tests/test_ledger_crash.py -q",
        "observe OBSERVED_COMMAND task-17",
    },
    "file.edit.applied": {
        f"entity file:{MIRROR}",
        "observe OBSERVED_FILE_EDIT task-17",
        f"cite {MIRROR}:88-93 by file",
    },
    "tool.call.completed": {"entity tool:Edit", "observe OBSERVED_TOOL_CALL task-17"},
    "access.refused": set(),
    "transcript.turn": {"entity person:Caroline"},
    "document.indexed": {
        "entity document:docs/operations.md",
        "cite docs/operations.md:1-4 by document",
        "cite docs/operations.md:1-1 by document",
        "cite docs/operations.md:3-4 by document",
    },
    "code.file.indexed": {f"entity code_file:{MIRROR}", f"cite {MIRROR}:1-214 by code_file"},
    "code.symbol.indexed": {
        f"entity code_symbol:{MIRROR}::LedgerMirror.repair_tail",
        f"relation code_symbol:{MIRROR}::LedgerMirror.repair_tail -defined_in-> code_file:{MIRROR}",
        f"cite {MIRROR}:80-112 by code_symbol",
    },
    "memory.fact.asserted": {
        "entity component:ledger mirror",
        "entity service:NATS JetStream",
        "relation component:ledger mirror -consumes_from-> service:NATS JetStream",
    },
    "memory.invalidated": {
        "invalidate ledger mirror -consumes_from-> NATS JetStream at 2025-06-12T14:05:00.000000Z"
    },
    "consolidation.candidate.created": {
        "entity consolidation_candidate:cand-claim-5f0c",
        "relation consolidation_candidate:cand-claim-5f0c -concerns-> service:auth-service",
    },
    "consolidation.candidate.reviewed": {"entity consolidation_candidate:cand-claim-5f0c"},
    "consolidation.candidate.promoted": {
        "entity consolidation_candidate:cand-claim-5f0c",
        "entity claim:cand-claim-5f0c",
        "relation service:auth-service -consolidated_into-> claim:cand-claim-5f0c",
    },
    "consolidation.promotion.retracted": {
        "entity consolidation_candidate:cand-claim-5f0c",
        "invalidate episode:cand-claim-5f0c at " + ts(1),
        "invalidate claim:cand-claim-5f0c at " + ts(1),
        "invalidate procedure:cand-claim-5f0c at " + ts(1),
    },
    "inference.edge.generated": {"inferred ?:ledger mirror -affected_by-> ?:issue-4"},
    "inference.edge.contradicted": set(),
    "inference.edge.retracted": {"retract ledger mirror -affected_by-> issue-4"},
    "causal.edge.generated": {
        "inferred decision:dec-9 -causal_fixed-> outcome:pytest tests/test_ledger_crash.py passes"
    },
    "outcome.explained": {
        "entity outcome:Ledger verification failed after the crash test",
        "relation outcome:Ledger verification failed after the crash test -explained_by-> "
        "cause:Unsynced final write in the ledger mirror",
        "relation outcome:Ledger verification failed after the crash test -concerns-> "
        "component:ledger mirror",
    },
}


def one_event(event_type: str, payload: dict[str, Any]) -> Event:
    return SessionLog("s1").add(event_type, payload)


def test_every_catalogue_type_has_an_extractor_and_an_expectation() -> None:
    assert set(BUILTIN_EXTRACTORS) == set(BUILTIN_EVENT_TYPES) == set(EXPECTED)
    assert len(BUILTIN_EXTRACTORS) == 31


@pytest.mark.parametrize("event_type", sorted(EXPECTED))
def test_documented_example_projects_as_expected(event_type: str) -> None:
    event = one_event(event_type, EXAMPLES[event_type])
    projection = extract(event)
    assert describe(projection) == EXPECTED[event_type]
    spine = projection.event
    assert (spine.session, spine.seq, spine.hash, spine.type, spine.ts) == (
        "s1",
        1,
        event.hash,
        event_type,
        ts(1),
    )
    assert spine.summary and len(spine.summary) <= 200
    for op in projection.ops:
        assert (op.provenance.event_seq, op.provenance.event_hash, op.provenance.event_type) == (
            1,
            event.hash,
            event_type,
        )
    assert extract(event) == projection  # pure: same event, same projection


def test_inferred_and_causal_edges_keep_their_audit_trail() -> None:
    (edge,) = extract(one_event("inference.edge.generated", EXAMPLES["inference.edge.generated"])).ops
    assert isinstance(edge, RelationAssertion)
    assert (edge.confidence, edge.inference_method, edge.edge_id) == (0.74, "co_occurrence", "inf-co-7")
    assert edge.evidence_event_seqs == (31,) and edge.derived_from_event_seq == 31
    assert edge.evidence_quotes == ("Ledger verification fails after a kill -9 during a batch write",)
    (causal,) = extract(one_event("causal.edge.generated", EXAMPLES["causal.edge.generated"])).ops
    assert isinstance(causal, RelationAssertion)
    assert (causal.review_status, causal.authority_status) == ("proposed", "non_authoritative")
    assert causal.evidence_event_seqs == (58, 64) and causal.inferred


@pytest.mark.parametrize(
    ("event_type", "payload", "expected"),
    [
        (
            "command.completed",
            {"command": "ls", "exit_code": 0, "task_id": "t1"},
            {"observe OBSERVED_COMMAND t1"},
        ),
        (
            "command.completed",
            {"command": "ls", "exit_code": 0, "taskId": "t1"},
            {"observe OBSERVED_COMMAND t1"},
        ),
        ("command.completed", {"command": "ls", "exit_code": 0}, set()),
        (
            "tool.call.completed",
            {"tool": "Read", "ok": True, "taskId": "t1"},
            {"observe OBSERVED_TOOL_CALL t1"},
        ),
        ("tool.call.completed", {"tool": "Read", "ok": True}, set()),
        ("file.edit.applied", {"path": "a.py", "task_id": "t1"}, {"observe OBSERVED_FILE_EDIT t1"}),
        ("file.edit.applied", {"path": "a.py"}, set()),
        (
            "hook.checkpoint",
            {"name": "pre-compact", "state": {}, "taskId": "t1"},
            {"observe HAS_CHECKPOINT t1"},
        ),
        ("hook.checkpoint", {"name": "pre-compact", "state": {}}, set()),
        ("decision.made", {"decision_id": "d", "title": "t", "task_id": "t1"}, set()),
    ],
)
def test_observations_only_with_an_explicit_task_id(
    event_type: str, payload: dict[str, Any], expected: set[str]
) -> None:
    lines = describe(extract(one_event(event_type, payload)))
    assert {line for line in lines if line.startswith("observe")} == expected


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {"path": "a.py", "change_kind": "delete"},
            {"invalidate file:a.py at " + ts(1), "cite a.py:None-None"},
        ),
        (
            {"path": "b.py", "change_kind": "rename", "previous_path": "a.py"},
            {"entity file:b.py", "cite b.py:None-None by file", "invalidate file:a.py at " + ts(1)},
        ),
    ],
)
def test_file_deletes_and_renames_close_the_old_file(payload: dict[str, Any], expected: set[str]) -> None:
    assert describe(extract(one_event("file.edit.applied", payload))) == expected


def test_fact_valid_from_and_thread_are_honoured() -> None:
    payload = {**EXAMPLES["memory.fact.asserted"], "valid_from": "2025-05-01T11:30:00.5+02:00"}
    projection = extract(one_event("memory.fact.asserted", payload))
    assert {
        op.valid_from for op in projection.ops if isinstance(op, EntityAssertion | RelationAssertion)
    } == {"2025-05-01T09:30:00.500000Z"}
    assert {op.provenance.source_thread for op in projection.ops} == {"t-0037"}


def test_unknown_types_project_one_generic_event_entity() -> None:
    projection = extract(one_event("deploy.finished", {"service": "api", "ok": True}))
    (op,) = projection.ops
    assert isinstance(op, EntityAssertion)
    assert (op.name, op.entity_type) == ("deploy.finished#1", "event")
    assert op.properties == {"event_type": "deploy.finished", "payload_keys": ["ok", "service"]}
    assert projection.event.summary.startswith("deploy.finished: ")


@pytest.mark.parametrize(
    ("event_type", "payload"),
    [
        ("task.proposed", {"title": "no id"}),
        (
            "inference.edge.generated",
            {"source": "a", "target": "b", "relation_type": "Bad Type", "confidence": 0.5, "method": "m"},
        ),
        (
            "memory.invalidated",
            {"entity": {"name": "a", "entity_type": "x"}, "invalid_at": "2025-13-01T00:00:00Z"},
        ),
    ],
)
def test_a_payload_that_cannot_be_projected_falls_back_to_the_generic_entity(
    event_type: str, payload: dict[str, Any]
) -> None:
    (op,) = extract(one_event(event_type, payload)).ops
    assert isinstance(op, EntityAssertion) and op.entity_type == "event"
    assert op.properties["invalid_payload"]


def test_plugins_register_their_own_extractors() -> None:
    def deploy(event: Event) -> EventProjection:
        return msgspec.structs.replace(generic(event), ops=())

    register_extractor("deploy.tested", deploy)
    try:
        assert extract(one_event("deploy.tested", {})).ops == ()
        with pytest.raises(ValueError, match="already has"):
            register_extractor("deploy.tested", generic)
        with pytest.raises(ValueError, match="already has"):
            register_extractor("task.proposed", generic)
    finally:
        register_extractor("deploy.tested", generic, replace=True)
    assert extractor_for("deploy.tested") is generic
