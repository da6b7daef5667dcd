"""The workflow pack's MCP tools, on the real MCP server in process (found through the `eventloom.mcp_tools`
entry point) and a real log: a run recorded through them is the events the recorder writes for the same
inputs, retries are safe, the session scope holds, and the questions are answered with citations by a
running node."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import Any

import pytest
from mcp import Client

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.backend import Backend
from gateway.access.tokens import Principal
from gateway.mcp.caller import Caller
from gateway.mcp.client import ToolCall, tool_caller
from gateway.mcp.server import EventloomMCP
from gateway.node import Node
from gateway.packs.workflow.recorder import WorkflowRecorder
from readmodels.query.client import MemoryClient
from tests.mcp_support import WORKFLOW_READ_TOOLS, WORKFLOW_RECORDING_TOOLS, failure
from tests.runtime_support import drained
from tests.test_workflow_recorder import EXPECTED, ISSUE, REPO, RUN, record_story

pytestmark = pytest.mark.anyio

AGENT = Principal("fixer-bot", "agent", ("team-a-*",))
OPERATOR = Principal("operator", "admin", ("*",))
RECORDING_TOOLS = WORKFLOW_RECORDING_TOOLS
READ_TOOLS = WORKFLOW_READ_TOOLS


class Token:
    """Every call comes from `principal`, as if over HTTP with its bearer token."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    async def caller(self, headers: Mapping[str, str] | None) -> Caller | None:
        return Caller(self.principal, "http")


@contextlib.asynccontextmanager
async def tools(log: EventLog, principal: Principal) -> AsyncIterator[ToolCall]:
    backend = Backend(log=log, memory=MemoryClient(log.client, timeout_s=1))
    async with Client(
        EventloomMCP(backend, Token(principal), toolsets="all"), read_timeout_seconds=60
    ) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed >= RECORDING_TOOLS | READ_TOOLS
        yield tool_caller(client)


# `record_story` of tests/test_workflow_recorder.py as an agent records it over MCP, with the ids the
# recorder would make up (each call also takes the session and the run).
PLAN_V2 = {"plan_id": f"{RUN}-p2"}
MCP_OPENING: list[tuple[str, dict[str, Any]]] = [
    (
        "workflow_run_start",
        {"workflow_type": "fix-issue", "agent": "fixer", "issue": ISSUE, "metadata": {"ticket": "T-1"}},
    ),
    (
        "workflow_message",
        {
            "message_id": f"{RUN}-m1",
            "role": "user",
            "author": "alice",
            "content": "The cart crashes when it is empty",
            "references": [ISSUE],
        },
    ),
    (
        "workflow_message",
        {
            "message_id": f"{RUN}-m2",
            "role": "assistant",
            "content": "Looking at cart.py",
            "responds_to": f"{RUN}-m1",
            "metadata": {"model": "m1"},
        },
    ),
]
MCP_TOOLS_USED: list[tuple[str, dict[str, Any], str, dict[str, Any]]] = [
    ("read_file", {"path": "cart.py"}, "def total(items): return sum(items) / len(items)", {}),
    (
        "run_tests",
        {"target": "tests/"},
        "ToolBroke: 3 failed",
        {"is_error": True, "error_message": "ToolBroke: 3 failed"},
    ),
    ("grep", {"pattern": "total("}, "cart.py:1", {}),
]
MCP_CLOSING: list[tuple[str, dict[str, Any]]] = [
    (
        "workflow_plan",
        {"plan_id": f"{RUN}-p1", "content": "Guard the empty cart in total()", "issue": ISSUE},
    ),
    (
        "workflow_plan",
        PLAN_V2
        | {
            "parent_id": f"{RUN}-p1",
            "content": "Guard it and add a test",
            "edited_by": "alice",
            "edit_message": "needs a test",
        },
    ),
    (
        "workflow_plan_review",
        PLAN_V2
        | {
            "review_id": f"{RUN}-v1",
            "reviewer": "bob",
            "verdict": "commented",
            "comment": "Which test file?",
            "suggests_edit": True,
        },
    ),
    (
        "workflow_plan_review",
        PLAN_V2 | {"review_id": f"{RUN}-v2", "reviewer": "alice", "verdict": "approved"},
    ),
    (
        "workflow_pull_request",
        {
            "pull_request": "octo/widgets#43",
            "title": "Guard empty carts",
            "author": "fixer",
            "resolves": [ISSUE],
            "created_at": "2026-11-26T10:00:00Z",
        },
    ),
    ("workflow_plan_implemented", PLAN_V2 | {"pull_request": "octo/widgets#43", "issue": ISSUE}),
    ("workflow_run_complete", {"status": "succeeded", "result": "opened octo/widgets#43"}),
]


def mcp_story() -> list[tuple[str, dict[str, Any]]]:
    traffic: list[tuple[str, dict[str, Any]]] = []
    for n, (name, parameters, content, error) in enumerate(MCP_TOOLS_USED, start=1):
        call = {"call_id": f"{RUN}-c{n}", "tool_name": name, "parameters": parameters}
        result = {"call_id": f"{RUN}-c{n}", "result_id": f"{RUN}-r{n}", "content": content} | error
        traffic += [("workflow_tool_call", call), ("workflow_tool_result", result)]
    return MCP_OPENING + traffic + MCP_CLOSING


async def record_over_mcp(call: ToolCall, session: str) -> None:
    for name, arguments in mcp_story():
        await call(name, {"session": session, "run_id": RUN} | arguments)


async def test_a_run_recorded_over_mcp_is_the_events_the_recorder_writes(
    settings: Settings, log: EventLog
) -> None:
    async with WorkflowRecorder(log, "team-a-recorder", agent="fixer", repository=REPO).run(
        42, workflow_type="fix-issue", run_id=RUN, metadata={"ticket": "T-1"}
    ) as run:
        await record_story(run)
    # a token limited to some sessions records only into runs of its own sessions: the projector says whose
    async with workflow_node(settings), tools(log, AGENT) as call:
        await record_over_mcp(call, "team-a-mcp")
        await record_over_mcp(call, "team-a-mcp")  # every call retried: nothing is appended twice
    by_recorder = [event async for event in log.events("team-a-recorder")]
    over_mcp = [event async for event in log.events("team-a-mcp")]
    assert [(e.type, e.payload) for e in over_mcp] == [(e.type, e.payload) for e in by_recorder] == EXPECTED
    assert {(e.actor, e.principal) for e in over_mcp} == {("mcp:fixer-bot", "token:fixer-bot")}


async def test_retries_are_safe_and_bad_input_names_the_field(settings: Settings, log: EventLog) -> None:
    at = {"session": "team-a-1", "run_id": "r1"}
    async with workflow_node(settings), tools(log, AGENT) as call:
        started = await call("workflow_run_start", {"session": "team-a-1", "workflow_type": "chat"})
        assert started["run_id"].startswith("run-") and started["citation"].startswith(
            "eventloom://team-a-1/"
        )
        first = await call("workflow_message", at | {"role": "user", "content": "hi", "message_id": "hi-1"})
        again = await call("workflow_message", at | {"role": "user", "content": "hi", "message_id": "hi-1"})
        assert again == first and first["message_id"] == "hi-1"
        reused = await failure(
            call, "workflow_message", at | {"role": "user", "content": "bye", "message_id": "hi-1"}
        )
        assert reused.code == "invalid_input" and reused.error["message"].startswith("message_id: 'hi-1' was")
        made_up = await call("workflow_tool_call", at | {"tool_name": "ls"})
        assert made_up["call_id"].startswith("r1-c-")
        bad_role = await failure(call, "workflow_message", at | {"role": "robot", "content": "beep"})
        assert bad_role.code == "invalid_input" and bad_role.error["message"].startswith("role")
        mismatched = await failure(
            call, "workflow_tool_result", at | {"call_id": "c", "error_message": "oops"}
        )
        assert mismatched.code == "invalid_input" and "`is_error` is false" in mismatched.error["message"]
        same_parent = await failure(
            call, "workflow_plan", at | {"content": "x", "plan_id": "p", "parent_id": "p"}
        )
        assert same_parent.code == "invalid_input" and "`parent_id`" in same_parent.error["message"]
        no_comment = await failure(
            call,
            "workflow_plan_review",
            {"session": "team-a-1", "plan_id": "p", "reviewer": "bob", "verdict": "commented"},
        )
        assert no_comment.code == "invalid_input" and "needs a `comment`" in no_comment.error["message"]
    types = [event.type async for event in log.events("team-a-1")]
    assert types == ["workflow.run.started", "workflow.message.recorded", "workflow.tool.called"]


async def test_the_session_scope_holds_for_the_workflow_tools(log: EventLog) -> None:
    async with tools(log, AGENT) as call:
        for name, arguments in (
            ("workflow_run_start", {"session": "team-b-1", "workflow_type": "chat", "run_id": "rb"}),
            ("workflow_message", {"session": "team-b-1", "run_id": "rb", "role": "user", "content": "x"}),
            (
                "workflow_plan_review",
                {"session": "audit", "plan_id": "p", "reviewer": "r", "verdict": "approved"},
            ),
        ):
            refused = await failure(call, name, arguments)
            assert refused.code == "forbidden" and refused.error["message"].startswith(
                "session: token 'fixer-bot'"
            )
        # the reads take no session: the answer is cut to the token's rows (tests/test_scope_follows_data.py)
        smuggled = await failure(call, "workflow_sequence", {"run_id": "rb", "session": "team-a-1"})
        assert smuggled.code == "invalid_input"
        assert smuggled.error["message"] == (
            "session: not an argument of workflow_sequence, which takes conversation, run_id"
        )
    assert not [event async for event in log.events("team-b-1")]
    audit = [event.payload async for event in log.events(log.settings.audit_session)]
    assert [(p["tool"], p["status"]) for p in audit][-2:] == [
        ("workflow_plan_review", "forbidden"),
        ("workflow_sequence", "invalid_input"),
    ]


@contextlib.asynccontextmanager
async def workflow_node(settings: Settings) -> AsyncIterator[Node]:
    running, stop = Node(replace(settings, projectors="workflow", producers="none")), asyncio.Event()
    task = asyncio.create_task(running.run(stop))
    await asyncio.wait_for(running.ready.wait(), 30)
    try:
        yield running
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def test_the_read_tools_answer_with_citations_from_a_running_node(
    settings: Settings, log: EventLog
) -> None:
    async with workflow_node(settings), tools(log, OPERATOR) as call:
        await record_over_mcp(call, "team-a-mcp")
        await drained(log, "projector-workflow", timeout=60)
        events = {
            event.payload.get("message_id") or event.payload.get("call_id"): event
            async for event in log.events("team-a-mcp")
            if event.type != "workflow.tool.returned"
        }
        answers = await read_everything(call)
    assert [run["run_id"] for run in answers["runs"]["runs"]] == [RUN]
    assert answers["runs"]["runs"][0]["status"] == "succeeded"
    assert answers["runs"]["runs"][0]["citation"].startswith("eventloom://team-a-mcp/events/1#")
    assert answers["issue_runs"]["runs"][0]["run_id"] == RUN
    sequence = answers["sequence"]["messages"]
    assert [m["message_id"] for m in sequence][:3] == [f"{RUN}-m1", f"{RUN}-m2", f"{RUN}-c1"]
    assert sequence[0]["citation"] == events[f"{RUN}-m1"].citation
    assert all(m["citation"].startswith("eventloom://team-a-mcp/events/") for m in sequence)
    conversation = answers["conversation"]["messages"]
    assert {m["kind"] for m in conversation} <= {"message", "plan"} and conversation
    (failed,) = answers["errors"]["tool_calls"]
    assert failed["call"]["tool_name"] == "run_tests" and failed["result"]["is_error"] is True
    assert failed["call"]["citation"] == events[f"{RUN}-c2"].citation
    history = answers["plan"]
    assert [v["plan_id"] for v in history["versions"]] == [f"{RUN}-p1", f"{RUN}-p2"]
    assert history["current"]["plan_id"] == f"{RUN}-p2" and history["current"]["status"] == "implemented"
    assert {r["action"] for r in history["reviews"]} >= {"approved", "edited"}
    implementation = answers["implementation"]
    assert [p["pull_request"] for p in implementation["pull_requests"]] == ["octo/widgets#43"]
    assert all(row["citation"] for row in implementation["plans"] + implementation["pull_requests"])
    assert answers["item"]["item"]["title"] == "Guard empty carts" and answers["item"]["item"]["citation"]
    assert [m["message_id"] for m in answers["path"]["messages"]] == [m["message_id"] for m in sequence]
    assert answers["unknown_plan"] == {"plan_id": "nope", "current": None, "versions": [], "reviews": []}


async def read_everything(call: ToolCall) -> dict[str, Any]:
    return {
        "runs": await call("workflow_runs", {"workflow_type": "fix-issue"}),
        "issue_runs": await call("workflow_issue_runs", {"issue": ISSUE}),
        "sequence": await call("workflow_sequence", {"run_id": RUN}),
        "conversation": await call("workflow_sequence", {"run_id": RUN, "conversation": True}),
        "errors": await call("workflow_tool_calls", {"run_id": RUN, "errors_only": True}),
        "plan": await call("workflow_plan_history", {"plan_id": f"{RUN}-p1"}),
        "implementation": await call("workflow_implementation", {"issue": ISSUE}),
        "item": await call("workflow_item", {"key": "octo/widgets#43", "label": "PullRequest"}),
        "path": await call("workflow_path", {"run_id": RUN}),
        "unknown_plan": await call("workflow_plan_history", {"plan_id": "nope"}),
    }
