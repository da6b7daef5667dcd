"""`eventloom workflow ...`: the workflow questions from the command line (entry point `eventloom.cli`).

Every command asks the node that runs the `workflow` projector (`WorkflowClient`), prints JSON with
`--json` (the answer's Structs as they come over the wire) and otherwise one readable block per row,
each with the `eventloom://` citation of the event that wrote it. Exit codes: 0 found, 1 not found or no
node answers, 2 invalid input, 3 no node running.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, fail, print_json, run, settings_of
from gateway.packs.workflow import cli_render as show
from gateway.packs.workflow.events import ITEM_KEY
from gateway.packs.workflow.reads import (
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    PathQuestion,
    PlanQuestion,
    RunsQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
)
from readmodels.retrieval.model import QueryError

if TYPE_CHECKING:  # the log and the client are imported when a command runs (`eventloom --help` stays fast)
    from gateway.packs.workflow.client import WorkflowClient

T = TypeVar("T")
workflow_app = typer.Typer(
    help="Agent workflow runs: runs by type or issue, a run's messages and tool calls, plan versions and "
    "reviews, what implemented an issue, issues and pull requests with their history. Every row is cited "
    "to the event that recorded it. Answered by the node that runs the `workflow` projector.",
    no_args_is_help=True,
)
JsonOption = Annotated[bool, typer.Option("--json", help="Print the answer as JSON")]
LimitOption = Annotated[int, typer.Option("--limit", help="Most runs to show (1-1000)")]
RunArgument = Annotated[str, typer.Argument(help="The run's id, as recorded")]
IssueArgument = Annotated[str, typer.Argument(help="The issue: owner/name#number")]


def register(app: typer.Typer) -> None:
    """Entry point `eventloom.cli`: add `eventloom workflow`."""
    app.add_typer(workflow_app, name="workflow")


async def _asking(settings: Settings, ask: Callable[[WorkflowClient], Awaitable[T]]) -> T:
    from eventloom.log import EventLog  # noqa: PLC0415
    from gateway.packs.workflow.client import WorkflowClient  # noqa: PLC0415
    from readmodels.query.protocol import MemoryUnavailableError  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        try:
            return await ask(WorkflowClient(log.client))
        except QueryError as exc:
            fail(f"invalid input: {exc}", EXIT_INVALID)
        except MemoryUnavailableError as exc:
            fail(str(exc), EXIT_FAILED)


def _answer(ctx: typer.Context, ask: Callable[[WorkflowClient], Awaitable[T]]) -> T:
    return run(_asking(settings_of(ctx), ask))


def _key(field: str, key: str) -> str:
    """An issue or pull request key, checked before asking (the questions take any string)."""
    if not ITEM_KEY.fullmatch(key):
        fail(f"invalid input: {field}: {key!r} is not owner/name#number", EXIT_INVALID)
    return key


def _json_or(as_json: bool, value: Any, missing: str | None = None) -> bool:
    """Print `value` as JSON when asked (exiting 1 if it is None); True when that was all to do."""
    if as_json:
        print_json(value)
        if value is None:
            raise typer.Exit(EXIT_FAILED)
        return True
    if value is None:
        fail(missing or "not found")
    return False


@workflow_app.command("runs", help="Runs, newest first: of one workflow type, or of every type.")
def runs(
    ctx: typer.Context,
    workflow_type: Annotated[
        str | None, typer.Option("--type", help="Only runs of this workflow type")
    ] = None,
    limit: LimitOption = 20,
    as_json: JsonOption = False,
) -> None:
    found = _answer(ctx, lambda c: c.runs(RunsQuestion(workflow_type=workflow_type, limit=limit)))
    if not _json_or(as_json, found):
        show.print_runs(found)


@workflow_app.command("issue-runs", help="The latest runs for an issue, newest first.")
def issue_runs(
    ctx: typer.Context, issue: IssueArgument, limit: LimitOption = 20, as_json: JsonOption = False
) -> None:
    question = IssueRunsQuestion(issue=_key("issue", issue), limit=limit)
    found = _answer(ctx, lambda c: c.issue_runs(question))
    if not _json_or(as_json, found):
        show.print_runs(found)


@workflow_app.command(
    "sequence", help="The complete ordered sequence of a run: messages, tool calls and results, plans."
)
def sequence(ctx: typer.Context, run_id: RunArgument, as_json: JsonOption = False) -> None:
    found = _answer(ctx, lambda c: c.sequence(SequenceQuestion(run_id=run_id)))
    if not _json_or(as_json, found):
        show.print_messages(found, f"message(s) in run {run_id}")


@workflow_app.command("conversation", help="A run's conversation in order, without tool calls and results.")
def conversation(ctx: typer.Context, run_id: RunArgument, as_json: JsonOption = False) -> None:
    found = _answer(ctx, lambda c: c.sequence(SequenceQuestion(run_id=run_id, conversation=True)))
    if not _json_or(as_json, found):
        show.print_messages(found, f"message(s) in the conversation of run {run_id}")


@workflow_app.command("tool-calls", help="Tool calls with their results; filter by run, by tool, by error.")
def tool_calls(
    ctx: typer.Context,
    run_id: Annotated[str | None, typer.Option("--run", help="Only calls of this run")] = None,
    tool: Annotated[str | None, typer.Option("--tool", help="Only calls of this tool")] = None,
    errors: Annotated[bool, typer.Option("--errors", help="Only calls whose result is an error")] = False,
    limit: Annotated[int, typer.Option("--limit", help="Most calls to show (1-1000)")] = 100,
    as_json: JsonOption = False,
) -> None:
    question = ToolCallsQuestion(run_id=run_id, tool=tool, errors_only=errors, limit=limit)
    found = _answer(ctx, lambda c: c.tool_calls(question))
    if not _json_or(as_json, found):
        show.print_tool_calls(found)


@workflow_app.command(
    "plan",
    help="A plan's version history (oldest first, the current one marked) and its review history: "
    "reviews, approvals, rejections, edits and comments, in time.",
)
def plan(
    ctx: typer.Context,
    plan_id: Annotated[str, typer.Argument(help="Any version of the plan: its plan id")],
    as_json: JsonOption = False,
) -> None:
    found = _answer(ctx, lambda c: c.plan(PlanQuestion(plan_id=plan_id)))
    if not _json_or(as_json, found, f"no plan version {plan_id!r}"):
        assert found is not None
        show.print_plan(found)


@workflow_app.command(
    "implemented",
    help="What implemented an issue: its implemented plans, the pull requests that resulted or resolve "
    "it, and its runs.",
)
def implemented(ctx: typer.Context, issue: IssueArgument, as_json: JsonOption = False) -> None:
    question = IssueQuestion(issue=_key("issue", issue))
    found = _answer(ctx, lambda c: c.implementation(question))
    if not _json_or(as_json, found):
        show.print_implementation(found)


@workflow_app.command(
    "item",
    help="An issue (or, with --pull-request, a pull request): its current title, state, labels and "
    "assignees (the latest revision wins) and every revision.",
)
def item(
    ctx: typer.Context,
    key: Annotated[str, typer.Argument(help="owner/name#number")],
    pull_request: Annotated[
        bool, typer.Option("--pull-request", help="KEY is a pull request, not an issue")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    question = ItemQuestion(key=_key("key", key), label="PullRequest" if pull_request else "Issue")
    found = _answer(ctx, lambda c: c.item(question))
    what = "pull request" if pull_request else "issue"
    if not _json_or(as_json, found, f"no {what} {key!r}"):
        assert found is not None
        show.print_item(found)


@workflow_app.command(
    "path", help="The NEXT path from a message (--message) or from the first message of a run (--run)."
)
def path(
    ctx: typer.Context,
    message_id: Annotated[str | None, typer.Option("--message", help="Start at this message id")] = None,
    run_id: Annotated[str | None, typer.Option("--run", help="Start at this run's first message")] = None,
    as_json: JsonOption = False,
) -> None:
    if (message_id is None) == (run_id is None):
        fail("invalid input: give one of --message and --run", EXIT_INVALID)
    question = PathQuestion(message_id=message_id, run_id=run_id)
    found = _answer(ctx, lambda c: c.path(question))
    if not _json_or(as_json, found):
        start = f"message {message_id}" if message_id else f"the start of run {run_id}"
        show.print_messages(found, f"message(s) on the NEXT path from {start}")
