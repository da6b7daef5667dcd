"""How `eventloom workflow ...` prints an answer for a person: one block per row, each with what it cites.

Lines go to stdout (a script may read them); notes such as "no runs" go to stderr like every command's.
"""

from __future__ import annotations

import json
from typing import Any

from rich.markup import escape

from gateway.cli.common import console
from gateway.packs.workflow.reads import (
    Implementation,
    ItemView,
    MessageView,
    PlanHistory,
    PlanVersionView,
    PullRequestView,
    ReviewView,
    RunView,
    ToolCallView,
)

INDENT = "   "


def note(text: str) -> None:
    console.print(escape(text), highlight=False)


def _cites(citation: str | None, indent: str = INDENT) -> None:
    if citation:
        print(f"{indent}cites {citation}")


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def _fields(*pairs: tuple[str, object]) -> str:
    return "  ".join(f"{name} {value}" for name, value in pairs if value not in (None, ""))


def print_runs(runs: list[RunView]) -> None:
    for run in runs:
        print(f"{run.run_id}  {run.workflow_type or '-'}  {run.status or '-'}")
        details = _fields(
            ("issue", run.issue),
            ("agent", run.agent),
            ("started", run.started_at),
            ("completed", run.completed_at),
            ("messages", run.messages),
        )
        print(f"{INDENT}{details}")
        if run.result:
            print(f"{INDENT}result: {run.result}")
        _cites(run.citation)
    note(f"{len(runs)} run(s), newest first")


def message_head(message: MessageView) -> str:
    """`3. assistant (claude)` / `4. tool_call read_file {...}` / `5. tool_result of call-1 ERROR ...`."""
    place = f"{message.position}. " if message.position is not None else ""
    who = f" ({message.author})" if message.author else ""
    if message.kind == "tool_call":
        status = f" [{message.status}]" if message.status else ""
        return f"{place}tool_call {message.tool_name}{status} {_compact(message.parameters or {})}"
    if message.kind == "tool_result":
        error = " ERROR" if message.is_error else ""
        return f"{place}tool_result of {message.call_id}{error}"
    if message.kind == "plan":
        return f"{place}plan {message.message_id} v{message.version} [{message.status}]{who}"
    if message.kind == "review_comment":
        return f"{place}review comment{who}"
    return f"{place}{message.role}{who}"


def print_message(message: MessageView, indent: str = "") -> None:
    print(f"{indent}{message_head(message)}  [{message.message_id}]  {message.timestamp or ''}".rstrip())
    for line in message.content.splitlines():
        print(f"{indent}{INDENT}{line}")
    if message.error_message:
        print(f"{indent}{INDENT}error: {message.error_message}")
    if message.responds_to:
        print(f"{indent}{INDENT}responds to {message.responds_to}")
    _cites(message.citation, indent + INDENT)


def print_messages(messages: list[MessageView], what: str) -> None:
    for message in messages:
        print_message(message)
    note(f"{len(messages)} {what}")


def print_tool_calls(calls: list[ToolCallView]) -> None:
    for pair in calls:
        print_message(pair.call)
        if pair.result is None:
            print(f"{INDENT}(no result recorded)")
        else:
            print_message(pair.result, INDENT)
    failed = sum(1 for pair in calls if pair.result is not None and pair.result.is_error)
    note(f"{len(calls)} tool call(s), {failed} with an error result")


def _version_line(version: PlanVersionView) -> str:
    current = "  (current)" if version.current else ""
    later = f"  superseded by {version.superseded_by}" if version.superseded_by else ""
    return f"v{version.version} {version.plan_id} [{version.status}]{current}{later}"


def print_version(version: PlanVersionView, indent: str = "") -> None:
    print(f"{indent}{_version_line(version)}")
    details = _fields(
        ("run", version.run_id),
        ("parent", version.parent_id),
        ("created", version.created_at),
        ("edited by", version.edited_by),
        ("at", version.edited_at),
    )
    if details:
        print(f"{indent}{INDENT}{details}")
    if version.edit_message:
        print(f"{indent}{INDENT}edit: {version.edit_message}")
    for line in version.content.splitlines():
        print(f"{indent}{INDENT}| {line}")
    _cites(version.citation, indent + INDENT)


def _review_line(review: ReviewView) -> str:
    comment = f": {review.comment}" if review.comment else ""
    return f"{review.at}  {review.by} {review.action} {review.plan_id}{comment}"


def print_plan(history: PlanHistory) -> None:
    current = history.current
    print(f"plan {history.plan_id}: current version {current.plan_id if current else '-'}")
    print("versions (oldest first):")
    for version in history.versions:
        print_version(version, INDENT)
    print("reviews:")
    for review in history.reviews:
        print(f"{INDENT}{_review_line(review)}")
        _cites(review.citation, INDENT * 2)
    note(f"{len(history.versions)} version(s), {len(history.reviews)} review(s)")


def _print_pull_request(pull: PullRequestView) -> None:
    print(f"{INDENT}{pull.pull_request}  {pull.state or '-'}  {pull.title or ''}".rstrip())
    details = _fields(
        ("author", pull.author), ("created", pull.created_at), ("generated by run", pull.run_id)
    )
    if details:
        print(f"{INDENT * 2}{details}")
    _cites(pull.citation, INDENT * 2)


def print_implementation(found: Implementation) -> None:
    print(f"issue {found.issue}")
    print("implemented by plans:" if found.plans else "implemented by plans: none")
    for plan in found.plans:
        print_version(plan, INDENT)
    print("pull requests:" if found.pull_requests else "pull requests: none")
    for pull in found.pull_requests:
        _print_pull_request(pull)
    print("runs:" if found.runs else "runs: none")
    for run in found.runs:
        print(f"{INDENT}{run.run_id}  {run.workflow_type or '-'}  {run.status or '-'}")
        _cites(run.citation, INDENT * 2)


def print_item(item: ItemView) -> None:
    kind = "issue" if item.label == "Issue" else "pull request"
    print(f"{kind} {item.key}  [{item.state or '-'}]  {item.title or ''}".rstrip())
    details = _fields(
        ("repository", item.repository),
        ("author", item.author),
        ("created", item.created_at),
        ("labels", ", ".join(item.labels)),
        ("assignees", ", ".join(item.assignees)),
    )
    if details:
        print(f"{INDENT}{details}")
    for line in (item.body or "").splitlines():
        print(f"{INDENT}| {line}")
    _cites(item.citation)
    print("history (each revision's values, in time):")
    for revision in item.history:
        print(f"{INDENT}{revision.at}  {_compact(revision.values)}")
        _cites(revision.citation, INDENT * 2)
