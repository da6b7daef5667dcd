"""Bad input ends in a clear error naming the field and writes nothing, never a traceback (issue 16,
item 6): JSON from outside (arguments, files), payload validation, and the MCP tools' argument parsing,
fuzzed with Hypothesis; and the CLI's own cases (non-UTF-8 files and arguments, JSON nested ~1,000 deep)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.types import CallToolResult

from eventloom.errors import EventValidationError
from eventloom.log import EventLog
from eventloom.settings import Settings
from eventloom.validation import MAX_DEPTH, decode_json_input, validate_payload_value
from gateway.access.backend import Backend
from gateway.mcp.server import EventloomMCP, LocalOperator
from readmodels.query.client import MemoryClient
from tests.conftest import run_cli

ANY_TEXT = st.text(max_size=30)  # lone surrogates and control characters included
anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()  # beyond 64 bits too
    | st.floats()  # NaN and infinities too
    | ANY_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ANY_TEXT, children, max_size=4),
    max_leaves=25,
)


def nested(depth: int) -> str:
    return '{"x":' + "[" * depth + "]" * depth + "}"


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200) | st.builds(lambda d: nested(d).encode(), st.integers(0, 3000)))
def test_json_input_is_decoded_or_refused_naming_the_field(data: bytes) -> None:
    try:
        decode_json_input(data, "payload", dict[str, Any])
    except EventValidationError as exc:
        assert exc.field == "payload"


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT)
def test_an_argument_with_undecodable_bytes_is_refused_naming_the_field(text: str) -> None:
    try:
        decode_json_input(json.dumps({"t": text}, ensure_ascii=False), "payload", dict[str, Any])
    except EventValidationError as exc:
        assert exc.field == "payload"
        assert any(0xD800 <= ord(ch) <= 0xDFFF for ch in text), exc


def test_deep_json_names_the_limit() -> None:
    with pytest.raises(EventValidationError, match=f"nested deeper than {MAX_DEPTH} levels"):
        decode_json_input(nested(1000), "params", dict[str, Any])


@settings(max_examples=400, deadline=None)
@given(event_type=st.sampled_from(["note.added", "decision.made", "task.claimed", "transcript.turn"]),
       payload=anything)  # fmt: skip
def test_payload_validation_accepts_or_names_the_field(event_type: str, payload: Any) -> None:
    try:
        validate_payload_value(event_type, payload)
    except EventValidationError as exc:
        assert exc.field.startswith("payload"), exc.field


tool_arguments = st.fixed_dictionaries(
    {},
    optional={
        "session": anything | st.from_regex(r"\A[a-z0-9-]{1,20}\Z"),
        "type": anything | st.sampled_from(["x.note.taken", "decision.made", "Bad Type"]),
        "payload": anything,
        "actor": anything,
        "caused_by": anything,
        "idempotency_key": anything,
        "expected_seq": anything,
        "text": anything,
        "limit": anything,
        "cypher": anything,
        "unknown_argument": anything,
    },
)
EXPECTED_CODES = {"invalid_input", "payload_too_large", "forbidden", "conflict", "unavailable"}


@pytest.mark.anyio
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(["memory_append", "memory_invalidate", "memory_search", "memory_replay"]),
       arguments=tool_arguments)  # fmt: skip
async def test_mcp_arguments_are_accepted_or_refused_with_a_code_never_a_crash(
    log: EventLog, tool: str, arguments: dict[str, Any]
) -> None:
    """The tools' real argument parsing and validation, in process, on a real log: whatever arrives."""
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=0.2))
    server = EventloomMCP(backend, LocalOperator(), toolsets="all")
    result = await server.call_tool(tool, arguments)
    if isinstance(result, CallToolResult) and result.is_error:
        error = (result.structured_content or {})["error"]
        assert error["code"] in EXPECTED_CODES, error
        assert error["message"], error


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Settings]:
    settings = Settings(data_dir=tmp_path / "data", projectors="none", producers="none")
    started = run_cli(settings, "up", "--detach")
    assert started.returncode == 0, started.stderr
    try:
        yield settings
    finally:
        run_cli(settings, "down")


def test_the_cli_refuses_bad_bytes_and_deep_json_and_writes_nothing(node: Settings, tmp_path: Path) -> None:
    settings = node
    not_utf8 = tmp_path / "latin1.jsonl"
    not_utf8.write_bytes(b'{"session":"s","type":"note.added","actor":"a","payload":{"t":"caf\xe9"}}\n')
    deep_line = tmp_path / "deep.jsonl"
    deep_line.write_text(json.dumps({"session": "s", "type": "note.added", "actor": "a"})[:-1]
                         + ',"payload":' + nested(1000) + "}\n")  # fmt: skip
    base = ["append", "--session", "s", "--type", "note.added", "--actor", "a"]
    cases = {
        "line: is not valid UTF-8": ["append", "--from", str(not_utf8)],
        "line: nested deeper than": ["append", "--from", str(deep_line)],
        "payload: is not valid UTF-8": [*base, "--payload", '{"t": "caf\udce9"}'],
        "payload: nested deeper than": [*base, "--payload", nested(1000)],
        "actor: ": ["append", "--session", "s", "--type", "note.added", "--actor", "a\udcff"],
        "params: nested deeper than": ["graph", "query", "RETURN 1", "--params", nested(1000)],
    }
    for message, argv in cases.items():
        result = run_cli(settings, *argv)
        assert result.returncode == 2, (argv[:3], result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    status = json.loads(run_cli(settings, "status", "--json").stdout)
    assert status["stream"]["messages"] == 0
