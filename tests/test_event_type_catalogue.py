"""Event types an agent can discover (`describe_event_types`, `eventloom types`), and unknown types refused
on append, before anything is written, unless open (`x.` prefix, EVENTLOOM_OPEN_EVENT_TYPES)."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from eventloom import COMMON_EVENT_TYPES, EventTypeInfo, describe_event_types
from eventloom.errors import EventValidationError
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.schemas import is_open_event_type, known_event_types, validate_payload
from eventloom.schemas.describe import NO_DESCRIPTION
from eventloom.schemas.registry import OPEN_TYPES_VARIABLE
from tests.conftest import REPO
from tests.test_event_types import EXAMPLES

pytestmark = pytest.mark.anyio
DESCRIBED = describe_event_types()
BY_NAME = {info.name: info for info in DESCRIBED}


def test_every_known_type_is_described_with_a_line_a_schema_and_an_example() -> None:
    described = describe_event_types()  # now: a plug-in a test installed may have added types since import
    assert [info.name for info in described] == known_event_types()
    for info in described:
        assert isinstance(info, EventTypeInfo)
        assert info.description and "\n" not in info.description
        assert info.payload_schema["type"] == "object"
    # a plug-in may register a type without a docstring or an example; every type Eventloom ships has both
    for name in EXAMPLES:
        assert BY_NAME[name].example is not None and name not in BY_NAME[name].description
        assert BY_NAME[name].description != NO_DESCRIPTION


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_every_example_validates_against_its_schema_both_ways(name: str) -> None:
    info = BY_NAME[name]
    if info.example is None:
        pytest.skip(f"{name}: a plug-in's type registered without an example")
    validate_payload(name, info.example)  # the payload Struct the appender checks
    jsonschema.validate(info.example, info.payload_schema)  # the JSON schema an agent is shown


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_is_the_first_one_its_doc_section_shows(name: str) -> None:
    assert BY_NAME[name].example == EXAMPLES[name]


def test_schemas_are_compact_yet_keep_fields_named_title_and_description() -> None:
    goal = BY_NAME["goal.created"].payload_schema
    assert {"title", "description"} <= set(goal["properties"])  # fields, not the keywords dropped
    assert "title" not in goal and "description" not in goal and "$ref" not in goal
    assert "title" not in json.dumps(BY_NAME["inference.edge.generated"].payload_schema["$defs"]["Evidence"])
    causal = BY_NAME["causal.edge.generated"]
    assert causal.legacy_versions == 2 and "evidence" in causal.payload_schema["required"]


def test_common_types_are_known_and_described_in_that_order() -> None:
    assert 6 <= len(COMMON_EVENT_TYPES) <= 10
    assert [info.name for info in describe_event_types(COMMON_EVENT_TYPES)] == list(COMMON_EVENT_TYPES)


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("decison.made", "decision.made"),
        ("task.created", "task.completed"),
        ("tasks.completed", "task.completed"),
    ],
)
def test_an_unknown_type_is_refused_naming_type_and_the_closest_known_ones(name: str, suggested: str) -> None:
    for refuse in (lambda: validate_payload(name, {}), lambda: describe_event_types([name])):
        with pytest.raises(EventValidationError) as caught:
            refuse()
        assert caught.value.field == "type"
        assert suggested in caught.value.reason and "x." in caught.value.reason


def test_open_types_the_prefix_and_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OPEN_TYPES_VARIABLE, "acme.*, deploy.finished")
    assert is_open_event_type("x.anything.goes")
    assert is_open_event_type("acme.build.done") and is_open_event_type("deploy.finished")
    assert not is_open_event_type("deploy.started") and not is_open_event_type("task.created")
    validate_payload("acme.build.done", {"anything": True})
    monkeypatch.setenv(OPEN_TYPES_VARIABLE, "*")
    validate_payload("task.created", {"an": "invented type, opened by the operator"})
    monkeypatch.delenv(OPEN_TYPES_VARIABLE)
    assert is_open_event_type("x.still.open") and not is_open_event_type("note.added")


async def test_an_append_of_an_unknown_type_writes_nothing(log: EventLog) -> None:
    with pytest.raises(EventValidationError) as caught:
        await log.append("unknown-types", "task.created", "agent:a", {"title": "an invented type"})
    assert caught.value.field == "type" and "task.completed" in caught.value.reason
    batch = [
        AppendRequest(
            session="unknown-types", type="goal.created", actor="a", payload=EXAMPLES["goal.created"]
        ),
        AppendRequest(session="unknown-types", type="decison.made", actor="a", payload={}),
    ]
    with pytest.raises(EventValidationError):  # a batch with one unknown type is refused whole
        await log.append_many(batch)
    first = await log.append("unknown-types", "x.team.note_added", "agent:a", {"text": "open"})
    assert first.seq == 1  # nothing of the refused appends was written before it


def test_the_cli_lists_types_describes_one_and_refuses_an_unknown_one() -> None:
    def eventloom(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-c", "from gateway.cli import main; main()", *args]
        return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=60, check=False)

    listed = eventloom("types")
    assert listed.returncode == 0 and "* decision.made" in listed.stdout and "x." in listed.stdout
    one = json.loads(eventloom("types", "outcome.explained", "--json").stdout)
    assert [t["name"] for t in one["types"]] == ["outcome.explained"]
    assert one["common"] == list(COMMON_EVENT_TYPES) and "x." in one["open_types"]
    jsonschema.validate(one["types"][0]["example"], one["types"][0]["payload_schema"])
    refused = eventloom("types", "decison.made")
    assert refused.returncode == 2 and "decision.made" in refused.stdout + refused.stderr
