"""Whatever arguments an agent sends whichever MCP tool (every installed pack's too): an answer or a
structured refusal, never a crash; an argument the tool does not take is refused naming it; a value of the
wrong JSON type is refused naming its field, never coerced (`"1"` is not 1) nor dropped.

The tools run in process on the real MCP server over a real log (no projectors: a read that gets past
its arguments answers `unavailable`, which is fine here: the arguments are what is fuzzed)."""

from __future__ import annotations

import json
import string
from typing import Any, Final, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import CallToolResult

from eventloom.log import EventLog
from gateway.access.backend import Backend
from gateway.mcp.failures import ErrorCode
from gateway.mcp.server import EventloomMCP, LocalOperator
from readmodels.query.client import MemoryClient

pytestmark = pytest.mark.anyio

SCHEMAS: Final = {
    tool.name: tool.parameters
    for tool in EventloomMCP(None, LocalOperator())._tool_manager.list_tools()  # type: ignore[arg-type]
}
CODES: Final = set(get_args(ErrorCode)) - {"internal"}
JSON_TYPES: Final = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
names = st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=12)
near_misses = ["fuzz-1", "1", "0", "true", "null", "[]", "{}", "d-1", "a/b#1"]
strings = st.sampled_from(near_misses) | st.text(max_size=30)


def declared_types(schema: dict[str, Any]) -> set[str]:
    """The JSON types a property's schema admits (`$ref` is an object; no type at all: anything)."""
    if "$ref" in schema:
        return {"object"}
    if "type" in schema:
        return {schema["type"]}
    if "anyOf" in schema:
        return set().union(*(declared_types(arm) for arm in schema["anyOf"]))
    if "enum" in schema or "const" in schema:
        return {"string"}
    return set(JSON_TYPES)


def typed(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of one of the property's own JSON types (which its limits may still refuse)."""
    options: list[st.SearchStrategy[Any]] = []
    for kind in sorted(declared_types(schema)):
        options.append(
            {
                "string": strings,
                "integer": st.integers(-3, 3000),
                "number": st.floats(-1, 2, allow_nan=False) | st.integers(0, 1),
                "boolean": st.booleans(),
                "object": st.dictionaries(names, json_values, max_size=3),
                "array": st.lists(json_values, max_size=3),
                "null": st.none(),
            }[kind]
        )
    enum = schema.get("enum") or [v for arm in schema.get("anyOf", []) for v in arm.get("enum", [])]
    if enum:
        options.append(st.sampled_from(enum))
    return st.one_of(options)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(sorted(SCHEMAS)))
    properties: dict[str, Any] = SCHEMAS[name].get("properties", {})
    chosen = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    arguments = {key: draw(typed(properties[key]) | json_values) for key in chosen}
    if draw(st.integers(0, 5)) == 0:
        arguments[draw(names)] = draw(json_values)
    return name, arguments


def omitted(value: Any, key: str, schema: dict[str, Any], required: set[str]) -> bool:
    """An explicit null for an optional argument without a default is the argument left out: the schema
    shows such an argument as its own type only (`gateway.mcp.schemas.compact_schema`); the server takes
    both."""
    return value is None and key not in required and "default" not in schema


def wrong_type(value: Any, schema: dict[str, Any]) -> bool:
    """`value` is of none of the property's JSON types (and is no JSON text the server may parse first:
    clients that send `"[1, 2]"` for a list are served)."""
    kinds = declared_types(schema)
    if isinstance(value, str) and "string" not in kinds:
        try:
            json.loads(value)
        except ValueError:
            return True
        return False
    if isinstance(value, bool):
        return "boolean" not in kinds
    return not any(isinstance(value, JSON_TYPES[kind]) for kind in kinds)


@pytest.fixture
def server(log: EventLog) -> EventloomMCP:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1), audit_session="fuzz-audit")
    return EventloomMCP(backend, LocalOperator(), toolsets="all")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=calls())
async def test_any_arguments_get_an_answer_or_a_refusal_naming_the_argument(
    server: EventloomMCP, call: tuple[str, dict[str, Any]]
) -> None:
    name, arguments = call
    result = await server.call_tool(name, arguments)
    assert isinstance(result, CallToolResult)
    error = (result.structured_content or {}).get("error") if result.is_error else None
    if error is not None:
        assert error["code"] in CODES, (name, arguments, error)
    properties: dict[str, Any] = SCHEMAS[name].get("properties", {})
    if unknown := sorted(set(arguments) - set(properties)):
        assert error is not None and error["code"] == "invalid_input", (name, arguments, error)
        assert error["message"].startswith(f"{unknown[0]}: not an argument of {name}")
        return
    required = set(SCHEMAS[name].get("required", []))
    mistyped = [
        key
        for key, value in arguments.items()
        if wrong_type(value, properties[key]) and not omitted(value, key, properties[key], required)
    ]
    if mistyped:
        assert error is not None and error["code"] == "invalid_input", (name, arguments, error)
        assert any(f"{key}" in error["message"] for key in mistyped), (name, arguments, error)


async def test_no_coercion_and_no_silently_dropped_argument(server: EventloomMCP) -> None:
    note = {"session": "strict-1", "type": "x.note.taken", "payload": {"text": "x"}}
    for arguments, field in (
        (note | {"expected_seq": "1"}, "expected_seq"),
        (note | {"expected_seq": 1.0}, "expected_seq"),
        (note | {"expected_seq": True}, "expected_seq"),
        (note | {"idempotency_key": 7}, "idempotency_key"),
        (note | {"sesion": "strict-1"}, "sesion"),
        ({**note, "payload": {"text": "x"}, "caused_by": [{"seq": "1"}]}, "caused_by"),
    ):
        result = await server.call_tool("memory_append", arguments)
        assert result.is_error and result.structured_content is not None
        error = result.structured_content["error"]
        assert error["code"] == "invalid_input" and error["message"].startswith(field), error
    assert [event async for event in server.backend.log.events("strict-1")] == []
    assert (await server.call_tool("memory_append", note | {"expected_seq": 0})).is_error is False


def test_every_input_schema_says_it_takes_nothing_else() -> None:
    assert SCHEMAS and all(schema.get("additionalProperties") is False for schema in SCHEMAS.values())
