"""The workflow questions as MCP tools, asked of a running node (`client.WorkflowClient`).

Every row of an answer carries `citation`, the `eventloom://` URI of the event that wrote it. The
questions span sessions (runs of a type, runs of an issue...) and take no `session`: a token limited to
some sessions gets the rows of those sessions only (gateway.access.scope cuts the rest), so a limit counts
rows before that cut.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from gateway.mcp.scope import answers_scoped_by_rows
from gateway.packs.workflow.reads import (
    MAX_LIMIT,
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    PathQuestion,
    PlanQuestion,
    RunsQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
    WorkflowReads,
)

Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many to return.")]
Id = Annotated[str, Field(min_length=1, max_length=256)]
ItemKey = Annotated[str, Field(min_length=3, max_length=300, description="owner/name#number")]


def reads_of(backend: Backend) -> WorkflowReads:
    from gateway.packs.workflow.client import WorkflowClient  # noqa: PLC0415 (imported when asked)

    return WorkflowClient(backend.log.client, after=current_caller().last_write)


def path_question(message_id: str | None, run_id: str | None) -> PathQuestion:
    try:
        return PathQuestion(message_id=message_id, run_id=run_id)
    except ValueError as exc:  # neither or both
        raise ToolFailure("invalid_input", f"message_id: {exc}") from None


def plain(answer: Any) -> Any:
    return msgspec.to_builtins(answer)


def register_read_tools(server: MCPServer, backend: Backend) -> None:
    """Runs and what happened in them."""
    answers_scoped_by_rows(
        server, "workflow_runs", "workflow_issue_runs", "workflow_sequence", "workflow_tool_calls"
    )

    @server.tool()
    async def workflow_runs(workflow_type: Id | None = None, limit: Limit = 20) -> dict[str, Any]:
        """Runs, newest first: of one workflow type, or of every type."""
        runs = await reads_of(backend).runs(RunsQuestion(workflow_type=workflow_type, limit=limit))
        return {"runs": plain(runs)}

    @server.tool()
    async def workflow_issue_runs(issue: ItemKey, limit: Limit = 20) -> dict[str, Any]:
        """The latest runs for an issue (owner/name#number), newest first."""
        runs = await reads_of(backend).issue_runs(IssueRunsQuestion(issue=issue, limit=limit))
        return {"issue": issue, "runs": plain(runs)}

    @server.tool()
    async def workflow_sequence(run_id: Id, conversation: bool = False) -> dict[str, Any]:
        """The complete ordered sequence of a run's messages, tool calls, results and plans; with
        `conversation`, only what was said (no tool traffic)."""
        question = SequenceQuestion(run_id=run_id, conversation=conversation)
        return {"run_id": run_id, "messages": plain(await reads_of(backend).sequence(question))}

    @server.tool()
    async def workflow_tool_calls(
        run_id: Id | None = None,
        tool: Id | None = None,
        errors_only: bool = False,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 100,
    ) -> dict[str, Any]:
        """Tool calls with their results: of a run or of all, of one tool, only those that failed."""
        question = ToolCallsQuestion(run_id=run_id, tool=tool, errors_only=errors_only, limit=limit)
        return {"tool_calls": plain(await reads_of(backend).tool_calls(question))}


def register_history_tools(server: MCPServer, backend: Backend) -> None:
    """Plans, issues and pull requests: their versions, reviews and revisions; the NEXT path."""
    answers_scoped_by_rows(
        server, "workflow_plan_history", "workflow_implementation", "workflow_item", "workflow_path"
    )

    @server.tool()
    async def workflow_plan_history(plan_id: Id) -> dict[str, Any]:
        """Every version of the plan `plan_id` belongs to (oldest first, the current one marked) and its
        review history: reviews, approvals, rejections, edits and comments. Unknown: no versions."""
        history = await reads_of(backend).plan(PlanQuestion(plan_id=plan_id))
        if history is None:
            return {"plan_id": plan_id, "current": None, "versions": [], "reviews": []}
        return dict(plain(history))

    @server.tool()
    async def workflow_implementation(issue: ItemKey) -> dict[str, Any]:
        """What implemented an issue: its plans marked implemented, the pull requests they resulted in
        and those resolving it, and its runs."""
        return dict(plain(await reads_of(backend).implementation(IssueQuestion(issue=issue))))

    @server.tool()
    async def workflow_item(key: ItemKey, label: Literal["Issue", "PullRequest"] = "Issue") -> dict[str, Any]:
        """An issue or pull request: its current title, state, labels and assignees (the latest change of
        each wins) and their history. Unknown: `item` is null."""
        item = await reads_of(backend).item(ItemQuestion(key=key, label=label))
        return {"item": plain(item)}

    @server.tool()
    async def workflow_path(message_id: Id | None = None, run_id: Id | None = None) -> dict[str, Any]:
        """The NEXT path from a message (or from the first message of run `run_id`) to the run's end."""
        question = path_question(message_id, run_id)
        return {"messages": plain(await reads_of(backend).path(question))}
