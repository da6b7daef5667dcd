"""The workflow store contract: every backend answers every question of `reads` the same way.

`workflow_store` is parametrized by backend (tests/workflow_support.py): LadybugDB and a real Neo4j. The
story is projected through the real `translate.changes`; answers are compared whole where they are small.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from gateway.packs.workflow.projector import WorkflowStore
from gateway.packs.workflow.reads import (
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    MessageView,
    PathQuestion,
    PlanQuestion,
    ReviewView,
    Revision,
    RunsQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
)
from tests import workflow_support as support
from tests.workflow_support import ISSUE, PULL, Story, project, rocket_story

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
workflow_store = support.workflow_store


@pytest.fixture
async def story(workflow_store: WorkflowStore) -> Story:
    told = rocket_story()
    assert await project(workflow_store, told.events) == len(told.events)
    return told


async def everything(store: WorkflowStore) -> dict[str, Any]:
    """Every question about the story, answered (as plain data, to compare two states of a store)."""
    answers = [
        await store.runs(RunsQuestion(limit=50)),
        await store.issue_runs(IssueRunsQuestion(issue=ISSUE)),
        *[await store.sequence(SequenceQuestion(run_id=run)) for run in ("run-1", "run-2", "run-3")],
        await store.tool_calls(ToolCallsQuestion()),
        await store.plan(PlanQuestion(plan_id="plan-1")),
        await store.implementation(IssueQuestion(issue=ISSUE)),
        await store.item(ItemQuestion(key=ISSUE)),
        await store.item(ItemQuestion(key=PULL, label="PullRequest")),
        await store.path(PathQuestion(run_id="run-2")),
    ]
    return {str(index): msgspec.to_builtins(answer) for index, answer in enumerate(answers)}


# -- runs ------------------------------------------------------------------------------------------------


async def test_runs_newest_first_of_a_workflow_type(workflow_store: WorkflowStore, story: Story) -> None:
    every = await workflow_store.runs(RunsQuestion())
    assert [run.run_id for run in every] == ["run-3", "run-2", "run-1"]
    fixes = await workflow_store.runs(RunsQuestion(workflow_type="fix-issue"))
    assert [run.run_id for run in fixes] == ["run-2", "run-1"]
    failed = fixes[1]
    assert (failed.status, failed.result, failed.agent, failed.issue) == (
        "failed",
        "tests still fail",
        "claude",
        ISSUE,
    )
    assert (failed.started_at, failed.messages) == (story.at("run-1"), 6)
    assert failed.completed_at is not None and failed.completed_at > failed.started_at  # type: ignore[operator]
    assert failed.metadata == {"model": "opus", "attempt": 1}
    assert failed.citation == story.citation("run-1")
    assert [run.run_id for run in await workflow_store.runs(RunsQuestion(limit=1))] == ["run-3"]
    assert await workflow_store.runs(RunsQuestion(workflow_type="deploy")) == []
    running = every[0]
    assert (running.status, running.completed_at, running.issue) == ("running", None, None)


async def test_latest_runs_of_an_issue(workflow_store: WorkflowStore, story: Story) -> None:
    runs = await workflow_store.issue_runs(IssueRunsQuestion(issue=ISSUE))
    assert [(run.run_id, run.status) for run in runs] == [("run-2", "succeeded"), ("run-1", "failed")]
    assert runs[0].citation == story.citation("run-2")
    latest = await workflow_store.issue_runs(IssueRunsQuestion(issue=ISSUE, limit=1))
    assert [run.run_id for run in latest] == ["run-2"]
    assert await workflow_store.issue_runs(IssueRunsQuestion(issue="acme/rocket#999")) == []


# -- sequences -------------------------------------------------------------------------------------------


async def test_the_complete_sequence_of_a_run_in_order(workflow_store: WorkflowStore, story: Story) -> None:
    sequence = await workflow_store.sequence(SequenceQuestion(run_id="run-1"))
    assert [(m.position, m.message_id, m.kind, m.role) for m in sequence] == [
        (1, "m1", "message", "user"),
        (2, "m2", "message", "assistant"),
        (3, "call-1", "tool_call", "tool_call"),
        (4, "call-1-result", "tool_result", "tool_result"),
        (5, "call-2", "tool_call", "tool_call"),
        (6, "call-2-result", "tool_result", "tool_result"),
    ]
    first, answer, call = sequence[0], sequence[1], sequence[4]
    assert first == MessageView(
        message_id="m1",
        kind="message",
        role="user",
        content="Please fix #42",
        timestamp=story.at("m1"),
        position=1,
        run_id="run-1",
        author="alice",
        citation=story.citation("m1"),
    )
    assert (answer.responds_to, answer.metadata) == ("m1", {"tokens": 12})
    assert (call.tool_name, call.parameters, call.status) == ("run_tests", {"target": "tests/"}, "error")
    assert [m.citation for m in sequence] == [story.citation(m.message_id) for m in sequence]


async def test_a_run_holds_its_plan_and_the_conversation_leaves_out_tool_traffic(
    workflow_store: WorkflowStore, story: Story
) -> None:
    sequence = await workflow_store.sequence(SequenceQuestion(run_id="run-2"))
    assert [(m.message_id, m.kind) for m in sequence] == [
        ("m3", "message"),
        ("plan-1", "plan"),
        ("plan-2", "plan"),
        ("call-3", "tool_call"),
        ("call-3-result", "tool_result"),
        ("m4", "message"),
    ]
    assert [m.position for m in sequence] == [1, 2, 3, 4, 5, 6]
    assert [(m.version, m.status) for m in sequence[1:3]] == [(1, "pending_review"), (2, "implemented")]
    conversation = await workflow_store.sequence(SequenceQuestion(run_id="run-2", conversation=True))
    assert [m.message_id for m in conversation] == ["m3", "plan-1", "plan-2", "m4"]
    assert conversation[-1].responds_to == "m3"
    assert await workflow_store.sequence(SequenceQuestion(run_id="no-such-run")) == []


async def test_the_next_path_from_a_message_or_from_a_run(
    workflow_store: WorkflowStore, story: Story
) -> None:
    from_call = await workflow_store.path(PathQuestion(message_id="call-1"))
    assert [m.message_id for m in from_call] == ["call-1", "call-1-result", "call-2", "call-2-result"]
    whole = await workflow_store.path(PathQuestion(run_id="run-2"))
    assert whole == await workflow_store.sequence(SequenceQuestion(run_id="run-2"))
    last = await workflow_store.path(PathQuestion(message_id="m4"))
    assert [m.message_id for m in last] == ["m4"]
    comment = await workflow_store.path(PathQuestion(message_id="c1"))  # in no run: a path of one
    assert [(m.message_id, m.kind, m.author) for m in comment] == [("c1", "review_comment", "bob")]
    assert await workflow_store.path(PathQuestion(message_id="nothing")) == []


# -- tool calls ------------------------------------------------------------------------------------------


async def test_tool_calls_with_their_results(workflow_store: WorkflowStore, story: Story) -> None:
    calls = await workflow_store.tool_calls(ToolCallsQuestion())
    assert [(c.call.message_id, c.result.message_id if c.result else None) for c in calls] == [
        ("call-1", "call-1-result"),
        ("call-2", "call-2-result"),
        ("call-3", "call-3-result"),
    ]
    read = calls[0]
    assert (read.call.tool_name, read.call.parameters, read.call.status) == (
        "read_file",
        {"path": "rocket/fins.py"},
        "ok",
    )
    assert read.result is not None
    assert (read.result.content, read.result.is_error, read.result.call_id) == (
        "def fins(): ...",
        False,
        "call-1",
    )
    assert read.result.citation == story.citation("call-1-result")
    in_run_2 = await workflow_store.tool_calls(ToolCallsQuestion(run_id="run-2"))
    assert [c.call.message_id for c in in_run_2] == ["call-3"]
    by_tool = await workflow_store.tool_calls(ToolCallsQuestion(tool="run_tests"))
    assert [c.call.message_id for c in by_tool] == ["call-2"]
    first_two = await workflow_store.tool_calls(ToolCallsQuestion(limit=2))
    assert [c.call.message_id for c in first_two] == ["call-1", "call-2"]


async def test_failed_tool_calls(workflow_store: WorkflowStore, story: Story) -> None:
    failed = await workflow_store.tool_calls(ToolCallsQuestion(errors_only=True))
    assert len(failed) == 1
    call, result = failed[0].call, failed[0].result
    assert (call.message_id, call.status, call.run_id) == ("call-2", "error", "run-1")
    assert result is not None
    assert (result.is_error, result.error_message, result.content) == (True, "3 tests failed", "3 failed")
    assert await workflow_store.tool_calls(ToolCallsQuestion(errors_only=True, run_id="run-2")) == []
    assert await workflow_store.tool_calls(ToolCallsQuestion(errors_only=True, tool="read_file")) == []


# -- plans -----------------------------------------------------------------------------------------------


async def test_plan_versions_and_review_history(workflow_store: WorkflowStore, story: Story) -> None:
    history = await workflow_store.plan(PlanQuestion(plan_id="plan-1"))
    assert history is not None
    assert history.plan_id == "plan-1"
    first, second = history.versions
    assert (first.plan_id, first.version, first.current, first.superseded_by) == (
        "plan-1",
        1,
        False,
        "plan-2",
    )
    assert (first.status, first.content, first.original_version, first.run_id) == (
        "pending_review",
        "Stiffen the fins.",
        "plan-1",
        "run-2",
    )
    assert (second.plan_id, second.version, second.current, second.parent_id) == ("plan-2", 2, True, "plan-1")
    assert (second.status, second.original_version, second.edited_by, second.edit_message) == (
        "implemented",
        "plan-1",
        "bob",
        "add the thrust check",
    )
    assert second.edited_at == story.at("plan-2")
    assert [first.citation, second.citation] == [story.citation("plan-1"), story.citation("plan-2")]
    assert history.current == second
    assert history.reviews == [
        ReviewView(action="reviewed", plan_id="plan-1", by="bob", at=story.at("c1"),
                   comment="Also check the thrust vector.", comment_id="c1", citation=story.citation("c1")),
        ReviewView(action="commented", plan_id="plan-1", by="bob", at=story.at("c1"),
                   comment="Also check the thrust vector.", comment_id="c1", citation=story.citation("c1")),
        ReviewView(action="suggested_edit", plan_id="plan-1", by="bob", at=story.at("c1"),
                   comment="Also check the thrust vector.", comment_id="c1", citation=story.citation("c1")),
        ReviewView(action="edited", plan_id="plan-2", by="bob", at=story.at("plan-2"),
                   comment="add the thrust check", citation=story.citation("plan-2")),
        ReviewView(action="reviewed", plan_id="plan-2", by="carol", at=story.at("approval"),
                   citation=story.citation("approval")),
        ReviewView(action="approved", plan_id="plan-2", by="carol", at=story.at("approval"),
                   citation=story.citation("approval")),
    ]  # fmt: skip
    asked_by_the_new_version = await workflow_store.plan(PlanQuestion(plan_id="plan-2"))
    assert asked_by_the_new_version is not None
    assert asked_by_the_new_version.plan_id == "plan-2"
    assert (asked_by_the_new_version.versions, asked_by_the_new_version.reviews) == (
        history.versions,
        history.reviews,
    )
    assert await workflow_store.plan(PlanQuestion(plan_id="no-such-plan")) is None
    assert await workflow_store.plan(PlanQuestion(plan_id="m1")) is None  # a message, not a plan


async def test_what_implemented_an_issue(workflow_store: WorkflowStore, story: Story) -> None:
    done = await workflow_store.implementation(IssueQuestion(issue=ISSUE))
    assert done.issue == ISSUE
    assert [(p.plan_id, p.version, p.status) for p in done.plans] == [("plan-2", 2, "implemented")]
    (pull,) = done.pull_requests
    assert (pull.pull_request, pull.title, pull.state, pull.author, pull.run_id) == (
        PULL,
        "Stiffen the fins",
        "open",
        "claude",
        "run-2",
    )
    assert (pull.created_at, pull.citation) == ("2025-05-01T09:30:00.000000Z", story.citation(PULL))
    assert [run.run_id for run in done.runs] == ["run-2", "run-1"]
    nothing = await workflow_store.implementation(IssueQuestion(issue="acme/rocket#7"))
    assert (nothing.plans, nothing.pull_requests, nothing.runs) == ([], [], [])


# -- issues and pull requests ----------------------------------------------------------------------------


async def test_the_latest_update_of_each_property_wins_and_history_keeps_all(
    workflow_store: WorkflowStore, story: Story
) -> None:
    issue = await workflow_store.item(ItemQuestion(key=ISSUE))
    assert issue is not None
    assert (issue.label, issue.number, issue.repository, issue.author) == (
        "Issue",
        42,
        "acme/rocket",
        "alice",
    )
    assert issue.created_at == "2025-04-30T10:00:00.000000Z"
    # "closed" (May 2) arrived before the retitle (May 1): it stays; the retitle still sets title and labels
    assert (issue.title, issue.state, issue.labels) == (
        "Rocket wobbles at launch",
        "closed",
        ["bug", "flight"],
    )
    assert issue.body == "It wobbles on the pad."
    assert issue.citation == story.citation(ISSUE)
    assert issue.history == [
        Revision(at="2025-04-30T10:00:00.000000Z", citation=story.citation(ISSUE),
                 values={"title": "Rocket wobbles", "body": "It wobbles on the pad.", "state": "open",
                         "labels": ["bug"]}),
        Revision(at="2025-05-01T12:00:00.000000Z", citation=story.citation("retitled"),
                 values={"title": "Rocket wobbles at launch", "state": "open", "labels": ["bug", "flight"]}),
        Revision(at="2025-05-02T12:00:00.000000Z", citation=story.citation("closed"),
                 values={"state": "closed"}),
    ]  # fmt: skip
    pull = await workflow_store.item(ItemQuestion(key=PULL, label="PullRequest"))
    assert pull is not None
    assert (pull.label, pull.number, pull.title, pull.state, pull.author) == (
        "PullRequest",
        43,
        "Stiffen the fins",
        "open",
        "claude",
    )
    assert await workflow_store.item(ItemQuestion(key="acme/rocket#404")) is None
    assert await workflow_store.item(ItemQuestion(key=ISSUE, label="PullRequest")) is None


# -- exactly once ----------------------------------------------------------------------------------------
