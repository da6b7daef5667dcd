"""The workflow recorder on a real log: a run's events in order with their exact payloads, retries that
record nothing twice, the failed and cancelled runs, and refusals naming the field."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from eventloom.errors import EventValidationError
from eventloom.event import SESSION_PATTERN, Event
from eventloom.log import EventLog
from gateway.packs.workflow.recorder import WorkflowRecorder, WorkflowRun
from gateway.packs.workflow.recording import AlreadyRecorded, idempotency_key, session_for

pytestmark = pytest.mark.anyio

REPO = "octo/widgets"
ISSUE = "octo/widgets#42"
RUN = "fix-42"


class ToolBroke(Exception):
    pass


async def record_story(run: WorkflowRun) -> None:
    """Messages, a tool pair, a failing tool, a plan edited and approved, a pull request: the run both
    this test and tests/test_workflow_mcp.py record."""
    asked = await run.message("user", "The cart crashes when it is empty", references=[42], author="alice")
    await run.message("assistant", "Looking at cart.py", responds_to=asked, metadata={"model": "m1"})
    call = await run.tool_call("read_file", {"path": "cart.py"})
    await run.tool_result(call, "def total(items): return sum(items) / len(items)")
    with pytest.raises(ToolBroke):
        async with run.tool("run_tests", {"target": "tests/"}):
            raise ToolBroke("3 failed")
    async with run.tool("grep", {"pattern": "total("}) as grep:
        grep.result("cart.py:1")
    plan = await run.plan("Guard the empty cart in total()")
    edited = await plan.edit("Guard it and add a test", edited_by="alice", edit_message="needs a test")
    await edited.review("bob", "commented", comment="Which test file?", suggests_edit=True)
    await edited.review("alice", "approved")
    pull = await run.pull_request(43, "Guard empty carts", created_at="2026-11-26T10:00:00Z")
    await edited.implemented(pull_request=pull.id)
    run.complete("succeeded", "opened octo/widgets#43")


EXPECTED: list[tuple[str, dict[str, Any]]] = [
    ("workflow.run.started", {"run_id": RUN, "workflow_type": "fix-issue", "agent": "fixer",
                              "issue": ISSUE, "metadata": {"ticket": "T-1"}}),
    ("workflow.message.recorded", {"run_id": RUN, "message_id": f"{RUN}-m1", "role": "user",
                                   "content": "The cart crashes when it is empty", "author": "alice",
                                   "references": [ISSUE], "metadata": {}}),
    ("workflow.message.recorded", {"run_id": RUN, "message_id": f"{RUN}-m2", "role": "assistant",
                                   "content": "Looking at cart.py", "responds_to": f"{RUN}-m1",
                                   "references": [], "metadata": {"model": "m1"}}),
    ("workflow.tool.called", {"run_id": RUN, "call_id": f"{RUN}-c1", "tool_name": "read_file",
                              "parameters": {"path": "cart.py"}}),
    ("workflow.tool.returned", {"run_id": RUN, "call_id": f"{RUN}-c1", "result_id": f"{RUN}-r1",
                                "content": "def total(items): return sum(items) / len(items)",
                                "is_error": False}),
    ("workflow.tool.called", {"run_id": RUN, "call_id": f"{RUN}-c2", "tool_name": "run_tests",
                              "parameters": {"target": "tests/"}}),
    ("workflow.tool.returned", {"run_id": RUN, "call_id": f"{RUN}-c2", "result_id": f"{RUN}-r2",
                                "content": "ToolBroke: 3 failed", "is_error": True,
                                "error_message": "ToolBroke: 3 failed"}),
    ("workflow.tool.called", {"run_id": RUN, "call_id": f"{RUN}-c3", "tool_name": "grep",
                              "parameters": {"pattern": "total("}}),
    ("workflow.tool.returned", {"run_id": RUN, "call_id": f"{RUN}-c3", "result_id": f"{RUN}-r3",
                                "content": "cart.py:1", "is_error": False}),
    ("workflow.plan.proposed", {"run_id": RUN, "plan_id": f"{RUN}-p1",
                                "content": "Guard the empty cart in total()", "issue": ISSUE}),
    ("workflow.plan.edited", {"run_id": RUN, "plan_id": f"{RUN}-p2", "parent_id": f"{RUN}-p1",
                              "original_id": f"{RUN}-p1", "content": "Guard it and add a test",
                              "edited_by": "alice", "edit_message": "needs a test"}),
    ("workflow.plan.reviewed", {"plan_id": f"{RUN}-p2", "reviewer": "bob", "verdict": "commented",
                                "comment_id": f"{RUN}-v1", "comment": "Which test file?",
                                "suggests_edit": True}),
    ("workflow.plan.reviewed", {"plan_id": f"{RUN}-p2", "reviewer": "alice", "verdict": "approved",
                                "suggests_edit": False}),
    ("workflow.pull_request.opened", {"pull_request": "octo/widgets#43", "author": "fixer",
                                      "created_at": "2026-11-26T10:00:00Z", "resolves": [ISSUE],
                                      "run_id": RUN, "title": "Guard empty carts"}),
    ("workflow.plan.implemented", {"plan_id": f"{RUN}-p2", "pull_request": "octo/widgets#43",
                                   "issue": ISSUE}),
    ("workflow.run.completed", {"run_id": RUN, "status": "succeeded", "result": "opened octo/widgets#43"}),
]  # fmt: skip


def recorder(log: EventLog, session: str | None = None) -> WorkflowRecorder:
    return WorkflowRecorder(log, session, agent="fixer", repository=REPO)


async def events_of(log: EventLog, session: str) -> list[Event]:
    return [event async for event in log.events(session)]


async def test_a_run_is_recorded_in_order_with_the_payloads_of_its_event_types(log: EventLog) -> None:
    async with recorder(log).run(
        42, workflow_type="fix-issue", run_id=RUN, metadata={"ticket": "T-1"}
    ) as run:
        await record_story(run)
    assert run.session == session_for(RUN) == "workflow-fix-42"
    events = await events_of(log, run.session)
    assert [(event.type, event.payload) for event in events] == EXPECTED
    assert [event.seq for event in events] == list(range(1, len(EXPECTED) + 1))
    assert {event.actor for event in events} == {"fixer"}
    assert run.started is not None and run.started.citation == events[0].citation
    assert run.completed is not None and run.completed.citation == events[-1].citation


async def test_a_retried_call_records_nothing_twice(log: EventLog) -> None:
    """A first try stored but never confirmed (as after a timeout) is what the retry returns; the same run
    recorded again under its id adds nothing; an id reused for something else is refused."""
    first_try = {"run_id": "r2", "message_id": "r2-m1", "role": "user", "content": "hello",
                 "references": [], "metadata": {}}  # fmt: skip
    async with recorder(log, "shared").run(workflow_type="chat", run_id="r2") as run:
        stored = await log.append(
            "shared", "workflow.message.recorded", "fixer", first_try,
            idempotency_key=idempotency_key("r2", "message:r2-m1"),
        )  # fmt: skip
        retried = await run.message("user", "hello")
        assert (retried.id, retried.citation) == ("r2-m1", stored.citation)
        assert (await run.message("user", "next")).id == "r2-m2"
        again = await run.message("user", "named", message_id="greeting")
        assert (await run.message("user", "named", message_id="greeting")).citation == again.citation
        with pytest.raises(AlreadyRecorded, match=r"^message_id: 'greeting' was already recorded"):
            await run.message("user", "something else", message_id="greeting")
    before = await events_of(log, "shared")
    assert [event.type for event in before].count("workflow.message.recorded") == 3
    async with recorder(log, "shared").run(workflow_type="chat", run_id="r2") as replayed:
        await replayed.message("user", "hello")
        await replayed.message("user", "next")
        await replayed.message("user", "named", message_id="greeting")
    assert [event.citation for event in await events_of(log, "shared")] == [e.citation for e in before]


async def test_a_run_that_raises_is_recorded_failed_and_the_error_goes_on(log: EventLog) -> None:
    with pytest.raises(KeyError):
        async with recorder(log).run("octo/widgets#7", workflow_type="fix-issue", run_id="r3") as run:
            await run.message("system", "You fix issues")
            raise KeyError("no such file")
    events = await events_of(log, session_for("r3"))
    assert [event.type for event in events] == [
        "workflow.run.started",
        "workflow.message.recorded",
        "workflow.run.completed",
    ]
    assert events[-1].payload == {"run_id": "r3", "status": "failed", "result": "KeyError: 'no such file'"}


async def test_a_cancelled_run_is_recorded_cancelled(log: EventLog) -> None:
    started = asyncio.Event()

    async def work() -> None:
        async with recorder(log).run(workflow_type="triage", run_id="r4"):
            started.set()
            await asyncio.sleep(60)

    task = asyncio.create_task(work())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (_, completed) = await events_of(log, session_for("r4"))
    assert completed.payload == {"run_id": "r4", "status": "cancelled", "result": "CancelledError"}


async def test_a_result_for_a_call_the_run_never_made_is_refused(log: EventLog) -> None:
    async with recorder(log).run(workflow_type="chat", run_id="r5") as run:
        with pytest.raises(ValueError, match=r"^call: run 'r5' made no tool call 'elsewhere-c1'"):
            await run.tool_result("elsewhere-c1", "ok")
        call = await run.tool_call("ls")
        await run.tool_result(call, "a b")
        with pytest.raises(ValueError, match=r"^call: 'r5-c1' already has a result"):
            await run.tool_result(call.id, "again")
    types = [event.type for event in await events_of(log, session_for("r5"))]
    assert types.count("workflow.tool.returned") == 1


async def test_bad_input_is_refused_naming_the_field_and_nothing_is_appended(log: EventLog) -> None:
    with pytest.raises(ValueError, match=r"^issue: a bare number \(42\) needs the recorder's `repository`"):
        async with WorkflowRecorder(log).run(42, workflow_type="fix-issue", run_id="r6"):
            pass
    with pytest.raises(ValueError, match=r"^repository: 'not a repo' is not owner/name"):
        WorkflowRecorder(log, repository="not a repo")
    async with recorder(log).run(workflow_type="chat", run_id="r7") as run:
        with pytest.raises(EventValidationError, match=r"^payload.role"):
            await run.message("robot", "beep")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=r"^references: 'nope' is not owner/name#number"):
            await run.message("user", "see", references=["nope"])
        with pytest.raises(ValueError, match=r"^payload: `error_message` is given but `is_error` is false"):
            await run.tool_result(await run.tool_call("ls"), "x", error_message="oops")
        with pytest.raises(ValueError, match=r"^status: must be succeeded"):
            run.complete("done")  # type: ignore[arg-type]
        assert (await run.message("user", "fine")).id == "r7-m1"  # the refused ones used no id
    odd = session_for("octo/widgets:run 1")  # a run id no session name can hold as it is
    assert SESSION_PATTERN.fullmatch(odd) and odd.startswith("workflow-octo_widgets_run_1-")
    assert not [event async for event in log.events(session_for("r6"))]
