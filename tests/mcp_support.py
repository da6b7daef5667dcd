"""Shared by the MCP tests (no tests here): every tool exercised through a real MCP client, and nodes
serving MCP over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from eventloom.settings import Settings
from gateway.cli.demo_story import CHAT, WORK, Told, tell
from gateway.mcp.client import ToolCall, ToolCallFailed, tool_caller
from gateway.mcp.http import HttpGateway, http_role, serve_http
from gateway.node import Node

DEFAULT_TOOLS = {
    "memory_append",
    "memory_invalidate",
    "memory_search",
    "memory_causal",
    "memory_record_turn",
    "memory_handoff",
    "memory_verify",
    "memory_event_types",
}
REVIEW_TOOLS = {"memory_consolidation_candidate", "memory_consolidation_review", "memory_inferred_status"}
ADMIN_TOOLS = {"memory_replay", "memory_graph_query"}
EVERY_TOOL = DEFAULT_TOOLS | REVIEW_TOOLS | ADMIN_TOOLS
WORKFLOW_RECORDING_TOOLS = {
    "workflow_run_start",
    "workflow_message",
    "workflow_tool_call",
    "workflow_tool_result",
    "workflow_plan",
    "workflow_plan_review",
    "workflow_plan_implemented",
    "workflow_pull_request",
    "workflow_run_complete",
}
WORKFLOW_READ_TOOLS = {
    "workflow_runs",
    "workflow_issue_runs",
    "workflow_sequence",
    "workflow_tool_calls",
    "workflow_plan_history",
    "workflow_implementation",
    "workflow_item",
    "workflow_path",
}
CLAIMS_TOOLS = {
    "claims_observe",
    "claims_claim",
    "claims_resolve",
    "claims_accept",
    "claims_about",
    "claims_basis",
    "claims_contradictions",
    "claims_observations",
    "claims_entity",
}
EVERY_TOOL |= WORKFLOW_RECORDING_TOOLS | WORKFLOW_READ_TOOLS | CLAIMS_TOOLS
"""The built-in tools and those of the workflow and claims packs, installed with Eventloom
(`eventloom.mcp_tools`): what a caller with every toolset sees (`EVENTLOOM_MCP_TOOLSETS=all`)."""
EVERY_TOOLSET = {"EVENTLOOM_MCP_TOOLSETS": "all"}
DECISION = "Cache prices in Redis with a 5 minute TTL"
OUTCOME = "Checkout p95 fell from 480 ms to 140 ms"
AUDIT = Settings().audit_session


async def failure(call: ToolCall, name: str, arguments: dict[str, Any]) -> ToolCallFailed:
    with pytest.raises(ToolCallFailed) as caught:
        await call(name, arguments)
    error = caught.value.error
    assert set(error) == {"code", "message", "remediation"} and error["remediation"]
    return caught.value


async def exercise_every_tool(call: ToolCall) -> Told:
    """The demo's story (which calls most tools), checked, then the tools it does not call."""
    told = await tell(call)
    assert told.answers["inferred"]["by_kind"] == {"inferred": 1, "causal": 1}
    assert told.answers["inferred"]["missing_provenance"] == 0
    assert told.answers["verify"]["ok"] and told.answers["verify"]["sessions"][0]["stream_events"] >= 14
    checkout = told.answers["checkout"]
    assert "TTL 60 seconds" in checkout["prompt"] and "TTL 5 minutes" not in checkout["prompt"]
    assert told.citations["revised"] in {citation["uri"] for citation in checkout["evidence"]}
    as_of_hits = {hit.get("entity"): hit for hit in told.answers["as_of"]["hits"]}
    assert as_of_hits["price cache"]["summary"] == "Redis cache of prices, TTL 5 minutes"
    (cause,) = told.answers["causes"]["steps"]
    assert (cause["cause"]["name"], cause["effect"]["name"], cause["depth"]) == ("d-redis", OUTCOME, 1)
    assert cause["cause"]["entity_type"] == "decision" and cause["cause"]["summary"] == DECISION
    assert cause["authoritative"] is False and cause["citations"]
    (effect,) = told.answers["effects"]["steps"]
    assert effect["effect"]["name"] == OUTCOME
    path = {"session": WORK, "name": "d-redis", "ask": "path", "target": OUTCOME}
    found = await call("memory_causal", path)
    assert [[s["effect"]["name"] for s in p["steps"]] for p in found["paths"]] == [[OUTCOME]]
    why = await call("memory_causal", {"session": WORK, "name": OUTCOME, "ask": "why"})
    assert [s["cause"]["name"] for s in why["steps"]] == ["d-redis"] and why["explanations"][0]["citations"]
    handoff = told.answers["handoff"]
    assert handoff["integrity"]["ok"] and handoff["summary"]["events"] >= 10
    assert told.citations["turn"].startswith(f"eventloom://{CHAT}/events/1#")
    assert told.answers["turn"]["checkout"]["request"]["session"] == CHAT

    legacy = {"question": "legacy price service", "session": WORK, "answer": "hits"}
    current = await call("memory_search", legacy)
    assert "legacy price service" not in {hit.get("entity") for hit in current["hits"]}
    assembled = await call("memory_search", {"question": "How do I flush stale prices?", "session": WORK})
    assert "redis-cli" in assembled["prompt"] and assembled["evidence"][0].startswith("eventloom://")
    replay = await call("memory_replay", {"session": WORK, "from_seq": 2, "limit": 3})
    assert [event["seq"] for event in replay["events"]] == [2, 3, 4] and replay["next_seq"] == 5
    assert all(event["sig"] and event["hash"] for event in replay["events"])
    rows = await call(
        "memory_graph_query",
        {"cypher": "MATCH (e:Entity) WHERE e.session = $s RETURN count(e) AS n", "params": {"s": WORK}},
    )
    assert rows["rows"][0]["n"] > 5
    audit = {"cypher": "MATCH (e:Entity) WHERE e.session = $s RETURN count(e) AS n", "params": {"s": AUDIT}}
    assert (await call("memory_graph_query", audit))["rows"][0]["n"] == 0  # tool calls are not memory
    refused = await failure(call, "memory_graph_query", {"cypher": "CREATE (n:Entity {name: 'x'})"})
    assert refused.code == "invalid_input" and "read-only" in refused.error["message"]
    return told


async def exercise_limits(call: ToolCall) -> None:
    """Oversized and malformed input: a structured error naming the field, and nothing appended."""
    big = {"text": "x" * (1024 * 1024)}
    too_big = await failure(
        call, "memory_append", {"session": "limits", "type": "x.note.taken", "payload": big}
    )
    assert too_big.code == "payload_too_large" and too_big.error["message"].startswith("payload:")
    long_question = await failure(call, "memory_search", {"question": "q" * 4097, "session": "limits"})
    assert long_question.code == "invalid_input" and "question" in long_question.error["message"]
    assert "q" * 50 not in long_question.error["message"]  # field names and rules, not values
    hits = {"question": "ok", "session": "limits", "answer": "hits"}
    for field, value in (("limit", 101), ("depth", 6)):
        wrong = await failure(call, "memory_search", hits | {field: value})
        assert wrong.code == "invalid_input" and wrong.error["message"].startswith(field)
    ignored = await failure(call, "memory_search", hits | {"answer": "prompt", "limit": 3})
    assert ignored.code == "invalid_input" and ignored.error["message"].startswith("limit: only with")
    bad_payload = await failure(
        call, "memory_append", {"session": "limits", "type": "decision.made", "payload": {"decision_id": "d"}}
    )
    assert bad_payload.code == "invalid_input" and "payload.title" in bad_payload.error["message"]
    unknown = await failure(call, "memory_forget_everything", {"session": "limits"})
    assert unknown.code == "unknown_tool"
    replay = await call("memory_replay", {"session": "limits"})
    assert replay["events"] == []
    await exercise_expected_seq(call)


async def exercise_expected_seq(call: ToolCall) -> None:
    """Append only if nobody else has since the caller read the session: a conflict otherwise, and nothing
    appended."""
    note = {"session": "limits-cas", "type": "x.note.taken", "payload": {"text": "first"}}
    assert (await call("memory_append", note | {"expected_seq": 0}))["seq"] == 1
    stale = await failure(call, "memory_append", note | {"expected_seq": 0})
    assert stale.code == "conflict" and stale.error["message"].startswith("expected_seq:")
    assert "expected new" in stale.error["message"] and "at seq 1" in stale.error["message"]
    assert (await call("memory_append", note | {"expected_seq": 1}))["seq"] == 2
    negative = await failure(call, "memory_append", note | {"expected_seq": -1})
    assert negative.code == "invalid_input" and negative.error["message"].startswith("expected_seq")
    replay = await call("memory_replay", {"session": "limits-cas"})
    assert [event["seq"] for event in replay["events"]] == [1, 2]


@contextlib.asynccontextmanager
async def http_node(settings: Settings) -> AsyncIterator[Node]:
    """A whole node serving MCP over HTTP on a free loopback port (`node.http_url`)."""
    node, stop = Node(settings, gateway=http_role(settings, "127.0.0.1", 0)), asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    try:
        await asyncio.wait_for(node.ready.wait(), 30)
        for _ in range(300):
            if node.http_url is not None:
                break
            await asyncio.sleep(0.05)
        assert node.http_url is not None, "the HTTP gateway did not start"
        yield node
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


@contextlib.asynccontextmanager
async def http_gateway(settings: Settings, url: str | None = None) -> AsyncIterator[HttpGateway]:
    """`eventloom gateway http` on a free loopback port, on the NATS at `url` (default: the settings'),
    until the block ends."""
    served: asyncio.Queue[HttpGateway] = asyncio.Queue()
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_http(settings, url or settings.nats_url, "127.0.0.1", 0, stop, on_ready=served.put)
    )
    try:
        yield await asyncio.wait_for(served.get(), 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


@contextlib.asynccontextmanager
async def http_tools(url: str, token: str) -> AsyncIterator[ToolCall]:
    """The official MCP client over streamable HTTP, sending `token` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
    ):
        yield tool_caller(client)
