"""An agent's session as an MCP client configured with nothing but the command runs it: over stdio, with
the default toolset only, it appends, reads its own write at once, follows a cause to its effect and
verifies the log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from eventloom.log import EventLog
from eventloom.position import Position
from eventloom.settings import Settings
from gateway.access.backend import Backend
from gateway.access.tokens import Principal
from gateway.mcp.client import ToolCallFailed, stdio_server, tool_caller
from gateway.mcp.own_writes import OwnWrites
from gateway.mcp.server import EventloomMCP
from readmodels.query.client import MemoryClient
from tests.mcp_support import DEFAULT_TOOLS, failure
from tests.test_claims_live import claims_node
from tests.test_mcp import clean_env
from tests.test_workflow_mcp import Token

pytestmark = pytest.mark.anyio
SESSION = "auth-outage"
DECISION = "Raise the auth-service connection pool to 64"
OUTCOME = "Login errors fell from 4% to 0.1%"


async def test_an_agent_reads_its_own_writes_finds_a_causal_chain_and_verifies(tmp_path: Path) -> None:
    called: list[str] = []
    async with Client(stdio_server(tmp_path / "data", clean_env()), read_timeout_seconds=60) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == DEFAULT_TOOLS
        raw = tool_caller(client)

        async def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            assert name in listed, f"{name} is not in the default toolset"
            called.append(name)
            return await raw(name, arguments)

        types = await call("memory_event_types", {})
        assert "decision.made" in types["common"] and "x." in types["open_types"]
        assert {"decision.made", "outcome.explained"} <= {t["name"] for t in types["types"]}
        described = await call("memory_event_types", {"type": "decision.made"})
        assert "title" in described["payload_schema"]["required"] and described["example"]["title"]
        misspelt = await failure(raw, "memory_event_types", {"type": "decison.made"})
        assert misspelt.code == "invalid_input" and "did you mean decision.made" in misspelt.error["message"]
        invented = await failure(
            raw, "memory_append", {"session": SESSION, "type": "task.created", "payload": {"title": "x"}}
        )
        assert invented.code == "invalid_input" and invented.error["message"].startswith("type:")
        decision = await call(
            "memory_append",
            {
                "session": SESSION,
                "type": "decision.made",
                "payload": {
                    "decision_id": "d-pool",
                    "title": DECISION,
                    "rationale": "pool exhausted at peak",
                },
            },
        )
        assert decision["position"] == f"{SESSION}/1" and decision["stream_seq"] >= 1
        # at once, no retry: the read waits for the caller's own write
        hits = await call(
            "memory_search",
            {"question": "auth-service connection pool", "session": SESSION, "answer": "hits"},
        )
        cited = {citation["uri"] for hit in hits["hits"] for citation in hit["citations"]}
        assert decision["citation"] in cited, hits
        assert hits["consistency"]["lagging"] == {} and hits["consistency"]["after"]["seq"] == 1
        prompt = await call(
            "memory_search", {"question": "What did we decide about the pool?", "session": SESSION}
        )
        assert DECISION in prompt["prompt"] and decision["citation"] in prompt["evidence"]

        outcome = await call(
            "memory_append",
            {
                "session": SESSION,
                "type": "outcome.explained",
                "payload": {
                    "outcome": OUTCOME,
                    "explanation": "Requests no longer wait for a free connection",
                    "taxonomy": "caused",
                    "cause": DECISION,
                    "cause_event_seq": decision["seq"],
                    "cause_event_hash": decision["hash"],
                },
            },
        )
        why = await call("memory_causal", {"session": SESSION, "name": OUTCOME, "ask": "why"})
        (explained,) = why["explanations"]
        assert outcome["citation"] in {c["uri"] for c in explained["citations"]}
        assert decision["citation"] in {c["uri"] for c in explained["citations"]}
        chain = await until_caused(call)
        assert [(s["cause"]["name"], s["effect"]["name"]) for s in chain["steps"]] == [("d-pool", OUTCOME)]
        assert chain["steps"][0]["authoritative"] is False and chain["steps"][0]["citations"]

        verified = await call("memory_verify", {"session": SESSION})
        assert verified["ok"] and verified["sessions"][0]["stream_events"] == 3  # the causal edge too
        with pytest.raises(ToolCallFailed) as hidden:
            await raw("memory_replay", {"session": SESSION})
        assert hidden.value.code == "unknown_tool" and "toolset 'admin'" in hidden.value.error["message"]
    assert set(called) <= DEFAULT_TOOLS


async def until_caused(call: Any) -> dict[str, Any]:
    """The causal edge is the causal producer's: a derived event, appended after the agent's, so the agent's
    own position does not cover it. Ask until it is there (30 s at most)."""
    asked = {"session": SESSION, "name": OUTCOME, "ask": "causes"}
    for _ in range(300):
        answer: dict[str, Any] = await call("memory_causal", asked)
        if answer["steps"]:
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError("the causal producer's edge never arrived")


async def test_after_is_checked_and_scoped_like_a_session(log: EventLog) -> None:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1))
    agent = Principal("bot", "agent", ("team-a-*",))
    async with Client(EventloomMCP(backend, Token(agent))) as client:
        call = tool_caller(client)
        asked = {"question": "anything", "session": "team-a-1"}
        bad = await failure(call, "memory_search", asked | {"after": "team-a-1"})
        assert bad.code == "invalid_input" and bad.error["message"].startswith("after: expected SESSION/SEQ")
        foreign = await failure(call, "memory_search", asked | {"after": "team-b-1/3"})
        assert foreign.code == "forbidden" and foreign.error["message"].startswith("after: token 'bot'")


def test_own_writes_remember_each_callers_newest_position_per_session_within_bounds() -> None:
    writes = OwnWrites(max_callers=2, max_sessions=2)
    writes.wrote("a", Position(session="s1", seq=3))
    writes.wrote("a", Position(session="s1", seq=2))  # an older write answered late: the newer stays
    writes.wrote("a", Position(session="s2", seq=1))
    assert writes.latest("a", "s1") == Position(session="s1", seq=3)
    assert writes.latest("a", None) == Position(session="s2", seq=1)
    writes.wrote("a", Position(session="s3", seq=1))  # s1 is forgotten: only not waited for
    assert writes.latest("a", "s1") is None and writes.latest("a", "s3") is not None
    writes.wrote("b", Position(session="s1", seq=1))
    writes.wrote("c", Position(session="s1", seq=1))  # a, heard from least recently, is forgotten
    assert writes.latest("a", None) is None and writes.latest("b", "s1") is not None
    assert writes.latest("nobody", None) is None


async def test_a_packs_question_over_mcp_waits_for_the_callers_own_write(
    settings: Settings, log: EventLog
) -> None:
    """The packs' tools take no `after`: the server's memory of the caller's last append does it."""
    async with claims_node(settings, log):
        backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=5))
        agent = Principal("bot", "agent", ("*",))
        async with Client(EventloomMCP(backend, Token(agent), "default,claims")) as client:
            call = tool_caller(client)
            for n in range(3):  # at once each time: no retry
                content = f"Dana moved to city number {n}."
                seen = await call("claims_observe", {"session": "obs", "content": content, "source": "chat"})
                found = await call("claims_observations", {"entity": "Dana", "session": "obs"})
                assert seen["citation"] in {o["citation"] for o in found["observations"]}, found
