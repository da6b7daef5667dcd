"""Readers skip what is not an event (issue 42, item 3): bytes published on a session's subject past the
appender, and an event signed by a key nobody trusted, between two events and at the session's tail, are
stepped over by the CLI's tail, the web API's timeline and events, and MCP's replay and handoff; each
answers the valid events and counts what it skipped, pointing at `eventloom quarantine list`, also once
the messages are cleared."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import httpx2
import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.tokens import add_token
from gateway.mcp.client import ToolCall
from tests.conftest import run_cli
from tests.mcp_support import http_node, http_tools
from tests.test_trust import forge_after

pytestmark = pytest.mark.anyio
SESSION = "junk-1"
POINTER = "see eventloom quarantine list"
SKIPPED = f"skipped 3 message(s) that are not events: {POINTER}"


@dataclass
class Doors:
    """The node's front doors: the web API (`get`) and MCP (`call`), both with an admin token."""

    base: str
    token: str
    call: ToolCall

    async def get(self, path: str, **params: Any) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        async with httpx2.AsyncClient(base_url=self.base, timeout=30) as http:
            return await http.get(path, params=params, headers=headers)


@pytest.fixture
async def doors(settings: Settings) -> AsyncIterator[Doors]:
    token = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["default", "admin"])
    async with http_node(replace(settings, projectors="graph", producers="none")) as node:
        assert node.http_url is not None
        async with http_tools(node.http_url, token) as call:
            yield Doors(node.http_url.removesuffix("/mcp"), token, call)


async def junk_around(log: EventLog) -> list[Event]:
    """Two events with a non-event between them, then a forgery and raw bytes at the session's tail."""
    subject = log.layout.subject_for(SESSION)
    first = await log.append(SESSION, "note.added", "agent:a", {"text": "before the junk"})
    await log.client.jetstream().publish(subject, b'{"foo": 1}')
    second = await log.append(SESSION, "note.added", "agent:a", {"text": "after the junk"})
    await forge_after(log, second, "a turn signed by a key nobody trusted")
    await log.client.jetstream().publish(subject, b"\x00\xffnot json at all")
    return [first, second]


def cli_tail(settings: Settings, *args: str) -> tuple[list[dict[str, Any]], str]:
    result = run_cli(settings, "tail", *args)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()], result.stderr


async def assert_every_reader_skips(settings: Settings, doors: Doors, valid: list[Event]) -> None:
    hashes = [e.hash for e in valid]
    mine, warned = cli_tail(settings, "--session", SESSION, "--json")
    assert [e["hash"] for e in mine] == hashes and SKIPPED in warned
    everything, warned = cli_tail(settings, "--json")
    assert [e["hash"] for e in everything if e["session"] == SESSION] == hashes and SKIPPED in warned
    plain = run_cli(settings, "tail", "--session", SESSION)
    assert plain.returncode == 0 and f"{SESSION}#2 note.added" in plain.stdout and SKIPPED in plain.stderr

    timeline = await doors.get("/v1/timeline", session=SESSION)
    assert timeline.status_code == 200, timeline.text
    assert [e["citation"] for e in timeline.json()["events"]] == [e.citation for e in valid]
    assert (timeline.json()["skipped"], timeline.json()["warnings"]) == (3, [SKIPPED])
    for event in valid:
        found = await doors.get(f"/v1/events/{SESSION}/{event.seq}")
        assert found.status_code == 200 and found.json()["hash"] == event.hash
    past = await doors.get(f"/v1/events/{SESSION}/{len(valid) + 1}")  # the forgery's seq at first
    assert past.status_code == 404 and "eventloom quarantine list" in past.json()["error"]["message"]

    replay = await doors.call("memory_replay", {"session": SESSION})
    assert [e["hash"] for e in replay["events"]] == hashes
    assert (replay["skipped"], replay["warnings"]) == (3, [SKIPPED])
    handoff = await doors.call("memory_handoff", {"session": SESSION})
    assert [line["citation"] for line in handoff["replay"]] == [e.citation for e in valid]
    assert handoff["summary"]["events"] == len(valid) and handoff["summary"]["last_hash"] == valid[-1].hash
    assert (handoff["skipped"], handoff["warnings"]) == (3, [SKIPPED])


async def test_every_reader_skips_what_is_not_an_event(
    settings: Settings, log: EventLog, doors: Doors
) -> None:
    valid = await junk_around(log)
    await assert_every_reader_skips(settings, doors, valid)

    listed = json.loads(run_cli(settings, "quarantine", "list", "--json").stdout)
    assert len([q for q in listed if q["session"] == SESSION]) == 3
    cleared = run_cli(settings, "quarantine", "clear", "--session", SESSION)
    assert cleared.returncode == 0, cleared.stderr
    # Cleared is reviewed, not believed: the readers go on skipping the same three messages.
    await assert_every_reader_skips(settings, doors, valid)
    third = await log.append(SESSION, "note.added", "agent:a", {"text": "after the review"})
    assert (third.seq, third.prev_hash) == (3, valid[-1].hash)
    await assert_every_reader_skips(settings, doors, [*valid, third])
