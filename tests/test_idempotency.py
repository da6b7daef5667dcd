"""An idempotency key names one request (issue 42, item 7): the same request again gets the original event;
another request under the same key is a conflict (`IdempotencyConflictError`, CLI exit 4, MCP `conflict`)
and appends nothing, whichever way the key is found (its record, the stream's duplicate window), and a
record that points at another request's event is never taken for this one's."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from eventloom import IdempotencyConflictError
from eventloom.appender import IDEMPOTENCY_BUCKET
from eventloom.bus.buckets import ensure_bucket
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.backend import Backend
from gateway.access.tokens import Principal
from gateway.cli.common import EXIT_CONFLICT
from gateway.mcp.caller import Caller
from gateway.mcp.client import ToolCall, tool_caller
from gateway.mcp.server import EventloomMCP
from readmodels.query.client import MemoryClient
from tests.conftest import run_cli
from tests.mcp_support import failure

pytestmark = pytest.mark.anyio
NOTE: dict[str, Any] = {"session": "s1", "type": "note.added", "actor": "agent:a", "payload": {"n": 1}}


async def appended(log: EventLog, session: str = "s1") -> list[int]:
    return [event.seq async for event in log.events(session)]


async def test_the_same_request_again_returns_the_original_event(log: EventLog) -> None:
    first = await log.append(**NOTE, idempotency_key="k", principal="token:a")
    again = await log.append(**NOTE, idempotency_key="k", principal="token:a")
    assert again == first
    assert await appended(log) == [1]


@pytest.mark.parametrize(
    ("changed", "fields"),
    [
        ({"payload": {"n": 2}}, ["payload"]),
        ({"payload": {"n": 1, "extra": True}}, ["payload"]),
        ({"type": "note.edited"}, ["type"]),
        ({"actor": "agent:b"}, ["actor"]),
        ({"principal": "token:b"}, ["principal"]),
        ({"caused_by": ["0" * 64]}, ["caused_by"]),
        ({"actor": "agent:b", "payload": {}}, ["actor", "payload"]),
    ],
)
async def test_another_request_under_the_same_key_is_a_conflict(
    log: EventLog, changed: dict[str, Any], fields: list[str]
) -> None:
    first = await log.append(**NOTE, idempotency_key="k", principal="token:a")
    other = NOTE | {"principal": "token:a"} | changed
    with pytest.raises(IdempotencyConflictError, match=r"^idempotency_key: .*seq 1") as caught:
        await log.append(**other, idempotency_key="k")
    assert caught.value.fields == fields and caught.value.recorded == first
    assert await appended(log) == [1]


async def test_a_conflict_is_found_in_the_duplicate_window_without_the_record(log: EventLog) -> None:
    """The stream deduplicates the key's message id before the record is written (a writer that died in
    between): the event the stream names is compared all the same."""
    await log.append(**NOTE, idempotency_key="k")
    bucket = await ensure_bucket(log.client, IDEMPOTENCY_BUCKET)
    for key in await bucket.keys():
        await bucket.purge(key)
    with pytest.raises(IdempotencyConflictError, match="payload"):
        await log.append(**(NOTE | {"payload": {"n": 2}}), idempotency_key="k")
    assert (await log.append(**NOTE, idempotency_key="k")).seq == 1
    assert await appended(log) == [1]


async def test_a_record_pointing_at_another_requests_event_is_not_returned(log: EventLog) -> None:
    """Defense in depth behind the bus permissions: a forged (or stale) record names an event this request
    did not append; the caller is told, not handed that event."""
    unrelated = await log.append(**(NOTE | {"payload": {"secret": "x"}}))
    bucket = await ensure_bucket(log.client, IDEMPOTENCY_BUCKET)
    forged = f"s1.{hashlib.sha256(b'k').hexdigest()[:40]}"
    await bucket.put(forged, b"1")  # stream seq 1: the unrelated event
    with pytest.raises(IdempotencyConflictError, match="payload") as caught:
        await log.append(**NOTE, idempotency_key="k")
    assert caught.value.recorded == unrelated
    assert await appended(log) == [1]


async def test_expected_seq_is_not_part_of_the_request(log: EventLog) -> None:
    """A retry of an append that landed finds the session past its expected seq (at its own event): it is
    a repeat, and gets the original event."""
    first = await log.append(**NOTE, idempotency_key="k", expected_seq=0)
    assert await log.append(**NOTE, idempotency_key="k", expected_seq=0) == first
    assert await log.append(**NOTE, idempotency_key="k") == first


def test_the_cli_exits_with_the_conflict_code(settings: Settings, tmp_path: Path) -> None:
    args = ["append", "--session", "s1", "--type", "note.added", "--actor", "a", "--idempotency-key", "k"]
    first = run_cli(settings, *args, "--payload", '{"n": 1}')
    assert first.returncode == 0, first.stderr
    assert run_cli(settings, *args, "--payload", '{"n": 1}').stdout == first.stdout
    other = run_cli(settings, *args, "--payload", '{"n": 2}')
    assert other.returncode == EXIT_CONFLICT == 4
    assert "idempotency_key" in other.stderr and "payload" in other.stderr
    source = tmp_path / "events.jsonl"
    line = {"session": "s1", "type": "note.added", "actor": "a", "payload": {"n": 3}, "idempotency_key": "k"}
    source.write_text(json.dumps(line) + "\n")
    imported = run_cli(settings, "append", "--from", str(source))
    assert imported.returncode == EXIT_CONFLICT and "idempotency_key" in imported.stderr
    tail = run_cli(settings, "tail", "--session", "s1", "--json")
    assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 1


class _Operator:
    async def caller(self, headers: object) -> Caller | None:
        return Caller(Principal("operator", "admin", ("*",)), "http")


@contextlib.asynccontextmanager
async def mcp_tools(log: EventLog) -> AsyncIterator[ToolCall]:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1))
    async with Client(EventloomMCP(backend, _Operator(), toolsets="all"), read_timeout_seconds=60) as client:
        yield tool_caller(client)


async def test_mcp_answers_a_conflict(log: EventLog) -> None:
    note = {"session": "s1", "type": "x.note.taken", "payload": {"text": "first"}, "idempotency_key": "k"}
    async with mcp_tools(log) as call:
        first = await call("memory_append", note)
        assert await call("memory_append", note) == first
        other = await failure(call, "memory_append", note | {"payload": {"text": "second"}})
    assert other.code == "conflict"
    assert other.error["message"].startswith("idempotency_key:") and "payload" in other.error["message"]
    assert await appended(log) == [1]


async def test_a_record_naming_another_sessions_event_is_replaced(log: EventLog) -> None:
    """A record can name no event of another session (its key holds the session): it is stale (a restored
    stream renumbered), the append goes on, and the record then names the new event."""
    await log.append(**(NOTE | {"session": "other"}))
    bucket = await ensure_bucket(log.client, IDEMPOTENCY_BUCKET)
    record = f"s1.{hashlib.sha256(b'k').hexdigest()[:40]}"
    await bucket.put(record, b"1")  # stream seq 1: session other's event
    first = await log.append(**NOTE, idempotency_key="k")
    assert (await bucket.get(record)).value == b"2"
    assert await log.append(**NOTE, idempotency_key="k") == first
    assert await appended(log) == [1]
