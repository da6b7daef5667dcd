"""Scope follows the data an answer carries, not the arguments a caller sent.

Generated, so a new tool or route is covered without anyone remembering to: every MCP tool the gateway
lists (every installed pack's too) and every HTTP route it serves is called by a token scoped to sessions
`ours-*`, with arguments aimed at the data of sessions it may not touch (their runs, plans, issues, claims,
entities, events), with and without a `session` of its own, and with a `session` argument the tool does
not take (the hole this closes: the check read it, the tool ignored it). No answer may carry a row of a
session outside the token's scope: none of those sessions' names (every citation names its session) and
none of the words only their events contain.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.backend import open_backend
from gateway.access.tokens import TokenBook, add_token
from gateway.cli.demo_story import CHAT, WORK, tell
from gateway.mcp.client import ToolCall
from gateway.mcp.http import plugin_routes
from gateway.web import web_routes
from tests.mcp_support import DECISION, failure, http_node, http_tools
from tests.runtime_support import drained

OURS = "ours-1"
THEIR_WORKFLOW = "theirs-wf"
THEIR_CLAIMS = "theirs-claims"
THEIR_SESSIONS = (WORK, CHAT, THEIR_WORKFLOW, THEIR_CLAIMS)
SECRET = "zqxsecret"
"""A word only their events contain (never an argument, which an answer may echo)."""
THEIR_WORDS = (*THEIR_SESSIONS, SECRET, DECISION)

pytestmark = pytest.mark.anyio


@dataclass
class Theirs:
    """Ids of the data a scoped token may not see, as a caller would aim at them."""

    run_id: str = "run-7f3a"
    issue: str = "acme/rocket#7"
    pull_request: str = "acme/rocket#8"
    plan_id: str = "plan-7f3a"
    message_id: str = "msg-7f3a"
    call_id: str = "call-7f3a"
    workflow_type: str = "fix-issue"
    entity: str = "Alice"
    claim: str = ""
    event: dict[str, Any] = field(default_factory=dict)


async def tell_theirs(call: ToolCall, theirs: Theirs) -> None:
    """Their sessions: the demo's story, a workflow run with every kind of record, and claims."""
    await tell(call)
    s, run = {"session": THEIR_WORKFLOW}, {"session": THEIR_WORKFLOW, "run_id": theirs.run_id}
    await call("workflow_run_start", {**run, "workflow_type": theirs.workflow_type, "issue": theirs.issue})
    await call(
        "workflow_message",
        {**run, "role": "user", "content": f"fix the {SECRET} fins", "message_id": theirs.message_id},
    )
    await call("workflow_tool_call", {**run, "tool_name": "read_file", "call_id": theirs.call_id})
    await call("workflow_tool_result", {**run, "call_id": theirs.call_id, "content": f"def {SECRET}(): ..."})
    await call(
        "workflow_plan",
        {**run, "content": f"1. {SECRET} the fins", "plan_id": theirs.plan_id, "issue": theirs.issue},
    )
    await call(
        "workflow_plan_review",
        {**s, "plan_id": theirs.plan_id, "reviewer": "bob", "verdict": "approved", "comment": SECRET},
    )
    await call(
        "workflow_pull_request",
        {**run, "pull_request": theirs.pull_request, "title": f"{SECRET} fins", "resolves": [theirs.issue]},
    )
    await call(
        "workflow_plan_implemented",
        {**s, "plan_id": theirs.plan_id, "pull_request": theirs.pull_request, "issue": theirs.issue},
    )
    await call("workflow_run_complete", {**run, "result": SECRET})
    c = {"session": THEIR_CLAIMS}
    seen = await call("claims_observe", {**c, "content": f"Alice joined {SECRET} as CTO", "source": "chat"})
    claim = {"subject": "Alice", "predicate": "works at", "object": SECRET, "confidence": 0.8}
    made = await call("claims_claim", {**c, **claim, "basis": [seen["citation"]]})
    await call("claims_claim", {**c, **claim, "object": "Acme", "basis": [seen["citation"]]})
    theirs.claim = made["citation"]
    replay = await call("memory_replay", {"session": WORK, "limit": 1})
    first = replay["events"][0]
    theirs.event = {"session": WORK, "seq": first["seq"], "hash": first["hash"]}


async def tell_ours(call: ToolCall) -> None:
    """Something of the token's own, so that its reads have rows to return, about the same entities as
    theirs (entity resolution may link them across sessions)."""
    run = {"session": OURS, "run_id": "run-ours"}
    note = {"session": OURS, "type": "x.note.taken", "payload": {"text": "our own note"}}
    await call("memory_append", note)
    entities = [
        {"name": "price cache", "entity_type": "service", "summary": "our price cache, a local dict"},
        {"name": "checkout api", "entity_type": "service", "summary": "our checkout"},
    ]
    relations = [{"source": "checkout api", "target": "price cache", "relation_type": "depends_on"}]
    fact = {"entities": entities, "relations": relations}
    await call("memory_append", {"session": OURS, "type": "memory.fact.asserted", "payload": fact})
    await call("workflow_run_start", {**run, "workflow_type": "fix-issue", "issue": "acme/rocket#7"})
    await call("workflow_message", {**run, "role": "user", "content": "our own message"})


def values(theirs: Theirs) -> dict[str, Any]:
    """An argument for every parameter name any tool takes, aimed at their data where it names some."""
    return {
        "session": OURS,
        "text": "price cache TTL and the fins",
        "question": "what was decided?",
        "type": "x.note.taken",
        "payload": {"text": "ours"},
        "name": "d-redis",
        "source": "d-redis",
        "target": "Checkout p95 fell from 480 ms to 140 ms",
        "entity": theirs.entity,
        "run_id": theirs.run_id,
        "issue": theirs.issue,
        "key": theirs.issue,
        "plan_id": theirs.plan_id,
        "message_id": theirs.message_id,
        "call_id": theirs.call_id,
        "workflow_type": theirs.workflow_type,
        "tool": "read_file",
        "tool_name": "read_file",
        "claim": theirs.claim,
        "candidate_id": "anything",
        "verdict": "accepted",
        "rationale": "looks right",
        "cypher": "MATCH (e:Entity) RETURN e.name, e.session LIMIT 50",
        "role": "user",
        "content": "ours",
        "reviewer": "bob",
        "pull_request": theirs.pull_request,
        "title": "ours",
        "subject": theirs.entity,
        "predicate": "works at",
        "object": "Acme",
        "confidence": 0.5,
        "basis": [theirs.claim],
        "supersedes": [theirs.claim],
        "source_events": [theirs.event],
    }


def argument_sets(schema: dict[str, Any], pool: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The calls to try for one tool: its required parameters and every optional one the pool has; then
    with a `session` of ours, of theirs, and (when it takes none) a `session` it ignores."""
    properties: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in pool]
    assert not missing, f"add a value for parameter(s) {missing} to values(): a new tool must be covered"
    aimed = {name: pool[name] for name in properties if name in pool and name != "session"}
    for variant in asked_each_way(properties, aimed):
        yield variant
        yield {**variant, "session": OURS}
        for session in THEIR_SESSIONS:
            yield {**variant, "session": session}


def asked_each_way(properties: dict[str, Any], aimed: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A tool that asks several questions (memory_search's `answer`, memory_causal's `ask`) asks each."""
    for mode in ("answer", "ask"):
        if mode in properties:
            for choice in properties[mode]["enum"]:
                variant = {**aimed, mode: choice}
                if mode == "ask" and choice != "path":
                    variant.pop("target")  # only a path goes to a target
                yield variant
            return
    yield aimed


def leaks(answer: str) -> list[str]:
    return [word for word in THEIR_WORDS if word in answer]


def answer_text(result: CallToolResult) -> str:
    texts = [getattr(block, "text", "") for block in result.content]
    return json.dumps(result.structured_content) + "".join(texts)


async def test_no_tool_and_no_route_answers_a_row_of_a_session_outside_the_token(settings: Settings) -> None:
    settings = dataclasses.replace(settings, gateway_rate=10_000.0)  # hundreds of calls, as fast as they go
    admin = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["all"])
    scoped = add_token(
        settings.tokens_file, "ci-agent", "agent", ["ours-*"], may_review=True, toolsets=["all"]
    )
    theirs = Theirs()
    async with http_node(settings) as node:
        url = node.http_url or ""
        async with http_tools(url, admin) as call:
            await tell_theirs(call, theirs)
            await tell_ours(call)
        async with await EventLog.open(settings) as log:
            for projector in ("graph", "keyword", "vector", "inferred", "workflow", "claims"):
                await drained(log, f"projector-{projector}", timeout=60)
        found, answered = await tool_leaks(url, scoped, values(theirs))
        found += await route_leaks(settings, url, scoped, theirs)
        async with http_tools(url, scoped) as call:
            await own_rows_only(call, theirs)
    assert not found, "\n".join(found)
    reads = {"memory_search", "memory_causal", "memory_handoff", "workflow_runs"}
    assert reads <= answered and len(answered) >= 18, f"too few tools answered at all: {sorted(answered)}"


async def own_rows_only(call: ToolCall, theirs: Theirs) -> None:
    """The issue's way in is closed, and a limited token still reads what is its own."""
    smuggled = await failure(call, "workflow_sequence", {"run_id": theirs.run_id, "session": OURS})
    assert smuggled.code == "invalid_input" and smuggled.error["message"].startswith("session:")
    assert "run_id" in smuggled.error["message"]  # what the tool does take
    asked = {"session": OURS, "question": "what does the checkout api depend on?", "answer": "checkout"}
    checkout = await call("memory_search", asked)
    assert "our price cache, a local dict" in checkout["prompt"]  # ours, though theirs has the same entity
    theirs_only = await call("workflow_sequence", {"run_id": theirs.run_id})
    assert theirs_only["messages"] == []
    ours = await call("workflow_sequence", {"run_id": "run-ours"})
    assert [m["content"] for m in ours["messages"]] == ["our own message"]
    runs = await call("workflow_runs", {})
    assert [run["run_id"] for run in runs["runs"]] == ["run-ours"]
    hijack = await failure(call, "workflow_run_complete", {"session": OURS, "run_id": theirs.run_id})
    assert hijack.code == "forbidden" and hijack.error["message"].startswith("run_id:")
    review = {"session": OURS, "plan_id": theirs.plan_id, "reviewer": "me", "verdict": "rejected"}
    assert (await failure(call, "workflow_plan_review", review)).code == "forbidden"


async def tool_leaks(url: str, token: str, pool: dict[str, Any]) -> tuple[list[str], set[str]]:
    """What any tool answered of their sessions, and which tools answered at all."""
    found: list[str] = []
    answered: set[str] = set()
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
    ):
        tools = (await client.list_tools()).tools
        assert len(tools) >= 35  # every toolset; the admin tools are hidden from this agent token
        for tool in tools:
            for arguments in argument_sets(tool.input_schema, pool):
                result = await client.call_tool(tool.name, arguments)
                if result.is_error:
                    continue
                answered.add(tool.name)
                text = answer_text(result)
                if words := leaks(text):
                    found.append(f"{tool.name} {sorted(arguments)} answered {words}: {text[:1500]}")
    return found, answered


async def route_leaks(settings: Settings, url: str, token: str, theirs: Theirs) -> list[str]:
    """Every route the gateway serves beside MCP, asked with GET and the parameters a caller could aim."""
    backend = await open_backend(settings)
    try:
        routes = web_routes(backend, TokenBook(settings.tokens_file), lambda _: 0.0)
        routes += plugin_routes(settings, backend)
    finally:
        await backend.log.close()
    base = url.removesuffix("/mcp")
    queries: list[dict[str, str]] = [
        {},
        {"session": OURS},
        *({"session": s} for s in THEIR_SESSIONS),
        {"search": theirs.entity},
        {"node": "d-redis"},
        {"node": theirs.entity, "session": OURS},
    ]
    path_params: dict[str, Callable[[str], str]] = {"session": lambda s: s, "seq": lambda _: "1"}
    found: list[str] = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        for route in routes:
            methods = route.methods or {"GET"}
            if "GET" not in methods:
                continue  # the login form's POST and the webhooks authenticate with a secret of their own
            for session in (OURS, *THEIR_SESSIONS):
                path = route.path
                for name, fill in path_params.items():
                    path = path.replace("{" + name + "}", fill(session))
                for query in queries:
                    response = await http.get(base + path, params=query)
                    if response.status_code >= 400:
                        continue
                    if words := leaks(response.text):
                        at = response.text.index(words[0])
                        context = response.text[max(0, at - 300) : at + 200]
                        found.append(f"GET {path} {query} answered {words}: ...{context}...")
    return found
