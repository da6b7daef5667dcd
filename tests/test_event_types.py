"""The built-in event types and the workflow and claims packs': schemas, error paths, and
docs/event-types.md kept in step with them.

The example payloads live in ONE place, the ```json blocks of docs/event-types.md; these tests parse them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from eventloom.errors import EventValidationError
from eventloom.event import TYPE_PATTERN
from eventloom.schemas import known_event_types, schema_for, validate_payload
from eventloom.schemas.catalogue import BUILTIN_EVENT_TYPES as CORE_EVENT_TYPES
from eventloom.schemas.catalogue import (
    DocumentChunk,
    EntityFact,
    EntityRef,
    Evidence,
    RelationFact,
    RelationRef,
    TaskRef,
)
from gateway.packs.claims.events import CLAIMS_EVENT_TYPES
from gateway.packs.workflow.events import WORKFLOW_EVENT_TYPES

BUILTIN_EVENT_TYPES = {**CORE_EVENT_TYPES, **WORKFLOW_EVENT_TYPES, **CLAIMS_EVENT_TYPES}
"""Every type docs/event-types.md documents: the core's and those of the packs Eventloom ships."""

DOC = Path(__file__).resolve().parents[1] / "docs" / "event-types.md"
SHARED_SHAPES: dict[str, type[msgspec.Struct]] = {
    "Evidence": Evidence,
    "EntityFact": EntityFact,
    "RelationFact": RelationFact,
    "EntityRef": EntityRef,
    "RelationRef": RelationRef,
    "DocumentChunk": DocumentChunk,
}
# Types whose rules span several fields, so a payload of only the required fields is not enough.
NEEDS_MORE_THAN_REQUIRED = {
    "memory.fact.asserted",
    "memory.invalidated",
    "inference.edge.contradicted",
    "inference.edge.retracted",
    "workflow.plan.reviewed",
}
_HEADING = re.compile(r"^(#{2,3}) (\S.*?)\s*$", re.MULTILINE)
_JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _sections(text: str) -> dict[str, str]:
    """Heading text -> the body up to the next heading of level 2 or 3."""
    heads = list(_HEADING.finditer(text))
    return {
        head.group(2): text[head.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        for i, head in enumerate(heads)
    }


def _field_table(body: str) -> dict[str, bool]:
    """The first field table of a section: field name -> required."""
    rows: dict[str, bool] = {}
    for line in body.splitlines():
        if not line.startswith("| `"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in _CELL_SPLIT.split(line)[1:-1]]
        assert len(cells) == 4, f"field row needs 4 cells: {line}"
        name, required = cells[0].strip("`"), cells[2]
        assert required in {"yes", "no"}, f"required must be yes/no: {line}"
        rows[name] = required == "yes"
    return rows


SECTIONS = _sections(DOC.read_text(encoding="utf-8"))
TYPE_SECTIONS = {title: body for title, body in SECTIONS.items() if TYPE_PATTERN.match(title)}
DOC_EXAMPLES: list[tuple[str, int, dict[str, Any]]] = [
    (event_type, index, json.loads(block))
    for event_type, body in TYPE_SECTIONS.items()
    for index, block in enumerate(_JSON_BLOCK.findall(body))
]
EXAMPLES: dict[str, dict[str, Any]] = {}
for _event_type, _index, _payload in DOC_EXAMPLES:
    EXAMPLES.setdefault(_event_type, _payload)
BUILTIN = sorted(BUILTIN_EVENT_TYPES)


def example(event_type: str) -> dict[str, Any]:
    """A fresh copy of the documented example payload, safe to mutate."""
    return copy.deepcopy(EXAMPLES[event_type])


def fields_of(event_type: str) -> list[msgspec.structs.FieldInfo]:
    return list(msgspec.structs.fields(BUILTIN_EVENT_TYPES[event_type]))


def rejected(event_type: str, payload: dict[str, Any]) -> EventValidationError:
    with pytest.raises(EventValidationError) as caught:
        validate_payload(event_type, payload)
    return caught.value


def _wrong_value(value: Any) -> Any:
    """A JSON value of a different kind than `value`."""
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, int | float):
        return "12"
    if isinstance(value, str):
        return 12345
    if isinstance(value, list):
        return "not a list"
    return ["not", "an", "object"]


REQUIRED_CASES = [(t, f.encode_name) for t in BUILTIN for f in fields_of(t) if f.required]
TYPED_CASES = [
    (t, f.encode_name)
    for t in BUILTIN
    for f in fields_of(t)
    if f.type is not Any and f.encode_name in EXAMPLES.get(t, {})
]
NULLABLE_CASES = [
    (t, f.encode_name) for t in BUILTIN for f in fields_of(t) if not f.required and f.default is None
]
TASK_REF_TYPES = [t for t in BUILTIN if issubclass(BUILTIN_EVENT_TYPES[t], TaskRef)]


# --- registry and docs stay in step ---------------------------------------------------------------------


def test_every_builtin_type_is_registered() -> None:
    assert set(BUILTIN) <= set(known_event_types())
    for event_type, schema in BUILTIN_EVENT_TYPES.items():
        assert schema_for(event_type) is schema


def test_every_builtin_type_has_exactly_one_doc_section() -> None:
    assert sorted(TYPE_SECTIONS) == BUILTIN


@pytest.mark.parametrize("event_type", BUILTIN)
def test_every_doc_section_has_a_json_example(event_type: str) -> None:
    assert event_type in EXAMPLES, f"docs/event-types.md: `## {event_type}` has no ```json example"


@pytest.mark.parametrize(
    ("event_type", "index", "payload"), DOC_EXAMPLES, ids=[f"{t}#{i}" for t, i, _ in DOC_EXAMPLES]
)
def test_every_doc_example_validates(event_type: str, index: int, payload: dict[str, Any]) -> None:
    validate_payload(event_type, payload)


@pytest.mark.parametrize("event_type", BUILTIN)
def test_doc_field_table_matches_schema(event_type: str) -> None:
    documented = _field_table(TYPE_SECTIONS[event_type])
    actual = {f.encode_name: f.required for f in fields_of(event_type)}
    assert documented == actual


@pytest.mark.parametrize("shape", sorted(SHARED_SHAPES))
def test_doc_shared_shape_table_matches_schema(shape: str) -> None:
    documented = _field_table(SECTIONS[shape])
    actual = {f.encode_name: f.required for f in msgspec.structs.fields(SHARED_SHAPES[shape])}
    assert documented == actual


# --- what every type accepts ---------------------------------------------------------------------------


@pytest.mark.parametrize("event_type", BUILTIN)
def test_only_required_fields_suffice_unless_a_cross_field_rule_needs_more(event_type: str) -> None:
    minimal = {
        f.encode_name: EXAMPLES[event_type][f.encode_name] for f in fields_of(event_type) if f.required
    }
    if event_type in NEEDS_MORE_THAN_REQUIRED:
        assert rejected(event_type, minimal).field == "payload"
    else:
        validate_payload(event_type, minimal)


@pytest.mark.parametrize("event_type", BUILTIN)
def test_extra_fields_are_allowed(event_type: str) -> None:
    payload = example(event_type) | {"x_future_field": {"nested": [1, 2, 3]}, "another": None}
    validate_payload(event_type, payload)


@pytest.mark.parametrize(("event_type", "field"), NULLABLE_CASES)
def test_optional_scalar_fields_accept_null(event_type: str, field: str) -> None:
    payload = example(event_type)
    payload[field] = None
    if event_type not in NEEDS_MORE_THAN_REQUIRED:
        validate_payload(event_type, payload)
        return
    try:  # null is never a type error, though it may leave a cross-field rule unmet
        validate_payload(event_type, payload)
    except EventValidationError as error:
        assert error.field == "payload"


@pytest.mark.parametrize(
    ("event_type", "payload"),
    [
        ("x.custom.thing", {"anything": [1, {"x": None}], "goes": True}),
        ("x.custom.thing", {}),
        ("x.acme.deploy.finished", {"service": "", "ok": "not checked"}),
    ],
)
def test_open_types_are_opaque(event_type: str, payload: dict[str, Any]) -> None:
    assert schema_for(event_type) is None
    validate_payload(event_type, payload)  # refusing unknown types: tests/test_event_type_catalogue.py


# --- errors name the exact field ----------------------------------------------------------------------


@pytest.mark.parametrize(("event_type", "field"), REQUIRED_CASES)
def test_missing_required_field_is_named(event_type: str, field: str) -> None:
    payload = example(event_type)
    del payload[field]
    error = rejected(event_type, payload)
    assert (error.field, error.reason) == (f"payload.{field}", "required field is missing")


@pytest.mark.parametrize(("event_type", "field"), TYPED_CASES)
def test_wrong_type_is_named(event_type: str, field: str) -> None:
    payload = example(event_type)
    payload[field] = _wrong_value(payload[field])
    assert rejected(event_type, payload).field == f"payload.{field}"


DELETE = object()


def _set(payload: dict[str, Any], path: str, value: Any) -> None:
    """Set `a.b[0].c`-style `path` in `payload`; the value `DELETE` removes the key."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    target: Any = payload
    for part in parts[:-1]:
        target = target[int(part[1:-1])] if part.startswith("[") else target[part]
    last = parts[-1]
    if value is DELETE:
        del target[last]
    else:
        target[int(last[1:-1]) if last.startswith("[") else last] = value


NESTED_AND_CONSTRAINT_CASES = [
    ("memory.fact.asserted", "entities[0].name", DELETE, "payload.entities[0].name"),
    ("memory.fact.asserted", "entities[1].entity_type", "Service", "payload.entities[1].entity_type"),
    ("memory.fact.asserted", "entities[0].entity_type", "web-service", "payload.entities[0].entity_type"),
    ("memory.fact.asserted", "entities[0].entity_type", "1service", "payload.entities[0].entity_type"),
    (
        "memory.fact.asserted",
        "relations[0].relation_type",
        "consumesFrom",
        "payload.relations[0].relation_type",
    ),
    ("memory.fact.asserted", "relations[0].target", DELETE, "payload.relations[0].target"),
    ("memory.fact.asserted", "entities[0].properties", [], "payload.entities[0].properties"),
    ("memory.fact.asserted", "valid_from", "yesterday", "payload.valid_from"),
    ("memory.invalidated", "relation.relation_type", "Consumes From", "payload.relation.relation_type"),
    ("memory.invalidated", "invalid_at", "2025-06-12", "payload.invalid_at"),
    ("inference.edge.generated", "relation_type", "AffectedBy", "payload.relation_type"),
    ("inference.edge.generated", "confidence", 1.5, "payload.confidence"),
    ("inference.edge.generated", "confidence", -0.1, "payload.confidence"),
    ("inference.edge.generated", "evidence[0].event_hash", "ABC", "payload.evidence[0].event_hash"),
    ("inference.edge.generated", "evidence[0].event_seq", 0, "payload.evidence[0].event_seq"),
    ("inference.edge.generated", "evidence[0]", {}, "payload.evidence[0]"),
    ("inference.edge.generated", "source_event_hash", "ca978112", "payload.source_event_hash"),
    ("causal.edge.generated", "taxonomy", "maybe_caused", "payload.taxonomy"),
    ("causal.edge.generated", "review_status", "Proposed", "payload.review_status"),
    ("causal.edge.generated", "evidence[1].quote", 42, "payload.evidence[1].quote"),
    ("outcome.explained", "taxonomy", "because", "payload.taxonomy"),
    ("inference.edge.contradicted", "evidence[0]", {"note": "no evidence field"}, "payload.evidence[0]"),
    ("task.completed", "decision_event_seq", 0, "payload.decision_event_seq"),
    ("task.completed", "decision_event_hash", "not-a-hash", "payload.decision_event_hash"),
    ("task.claimed", "assignee", "", "payload.assignee"),
    ("transcript.turn", "role", "narrator", "payload.role"),
    ("consolidation.candidate.reviewed", "decision", "maybe", "payload.decision"),
    ("file.edit.applied", "change_kind", "edit", "payload.change_kind"),
    ("file.edit.applied", "line_end", 10, "payload"),
    ("tool.call.completed", "arguments[0]", "", "payload.arguments[0]"),
    ("document.indexed", "chunks[1].line_start", 0, "payload.chunks[1].line_start"),
    ("document.indexed", "chunks[0].text", DELETE, "payload.chunks[0].text"),
    ("document.indexed", "chunks[1].line_end", 2, "payload.chunks[1]"),
    ("code.symbol.indexed", "line_end", 79, "payload"),
    ("code.file.indexed", "line_count", -1, "payload.line_count"),
    ("command.completed", "duration_ms", -5, "payload.duration_ms"),
    ("command.completed", "exit_code", 1.5, "payload.exit_code"),
    ("hook.checkpoint", "state", None, "payload.state"),
    ("session.started", "tags", None, "payload.tags"),
    ("session.started", "tags[1]", "", "payload.tags[1]"),
]


@pytest.mark.parametrize(("event_type", "path", "value", "field"), NESTED_AND_CONSTRAINT_CASES)
def test_nested_and_constrained_errors_are_named(event_type: str, path: str, value: Any, field: str) -> None:
    payload = example(event_type)
    _set(payload, path, value)
    assert rejected(event_type, payload).field == field


# --- cross-field rules ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event_type", "payload", "reason_mentions"),
    [
        ("memory.fact.asserted", {}, "entities"),
        ("memory.fact.asserted", {"entities": [], "relations": []}, "relations"),
        ("memory.invalidated", {"invalid_at": "2025-06-12T14:05:00Z"}, "exactly one"),
        (
            "memory.invalidated",
            {
                "invalid_at": "2025-06-12T14:05:00Z",
                "entity": {"name": "a", "entity_type": "component"},
                "relation": {"source": "a", "target": "b", "relation_type": "uses"},
            },
            "exactly one",
        ),
        ("inference.edge.contradicted", {"reason": "wrong", "source": "a", "target": "b"}, "edge_id"),
        ("inference.edge.retracted", {"reason": "wrong"}, "edge_id"),
    ],
)
def test_cross_field_rules(event_type: str, payload: dict[str, Any], reason_mentions: str) -> None:
    error = rejected(event_type, payload)
    assert error.field == "payload"
    assert reason_mentions in error.reason


@pytest.mark.parametrize(
    ("event_type", "payload"),
    [
        ("inference.edge.contradicted", {"reason": "wrong", "edge_id": "inf-1"}),
        (
            "inference.edge.retracted",
            {"reason": "wrong", "source": "a", "target": "b", "relation_type": "uses"},
        ),
        (
            "memory.invalidated",
            {"invalid_at": "2025-06-12T16:05:00.123+02:00", "entity": {"name": "a", "entity_type": "x"}},
        ),
        ("memory.fact.asserted", {"relations": [{"source": "a", "target": "b", "relation_type": "uses"}]}),
    ],
)
def test_either_form_of_a_cross_field_rule_passes(event_type: str, payload: dict[str, Any]) -> None:
    validate_payload(event_type, payload)


# --- task_id / taskId -------------------------------------------------------------------------------------


def test_task_ref_types_are_the_observation_events() -> None:
    assert set(TASK_REF_TYPES) == {
        "command.completed",
        "decision.made",
        "file.edit.applied",
        "hook.checkpoint",
        "issue.diagnosed",
        "tool.call.completed",
        "verification.recorded",
    }


@pytest.mark.parametrize("event_type", TASK_REF_TYPES)
@pytest.mark.parametrize("spelling", ["task_id", "taskId"])
def test_task_id_accepts_either_spelling(event_type: str, spelling: str) -> None:
    payload = {k: v for k, v in example(event_type).items() if k not in {"task_id", "taskId"}}
    payload[spelling] = "task-99"
    validate_payload(event_type, payload)
    decoded = msgspec.convert(payload, BUILTIN_EVENT_TYPES[event_type], strict=True)
    assert isinstance(decoded, TaskRef)
    assert decoded.effective_task_id == "task-99"


@pytest.mark.parametrize("event_type", TASK_REF_TYPES)
def test_task_id_spellings_must_agree(event_type: str) -> None:
    payload = example(event_type)
    validate_payload(event_type, payload | {"task_id": "task-1", "taskId": "task-1"})
    error = rejected(event_type, payload | {"task_id": "task-1", "taskId": "task-2"})
    assert error.field == "payload"
    assert "taskId" in error.reason


@pytest.mark.parametrize("event_type", TASK_REF_TYPES)
def test_task_id_camel_case_is_checked_too(event_type: str) -> None:
    payload = {k: v for k, v in example(event_type).items() if k != "task_id"}
    assert rejected(event_type, payload | {"taskId": ""}).field == "payload.taskId"
    assert rejected(event_type, payload | {"taskId": 17}).field == "payload.taskId"


def test_task_completed_decision_citation_is_optional() -> None:
    validate_payload("task.completed", {"task_id": "task-17"})
    validate_payload("task.completed", {"task_id": "task-17", "decision_event_seq": 1})
