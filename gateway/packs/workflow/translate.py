"""From an event to the workflow read model's operations: pure, deterministic, one `WorkflowChanges` each.

Events of other types, and any whose payload fits no schema of its type, give no operations (the store
still moves its checkpoint past them). Timestamps a payload carries (GitHub's `created_at`...) are made
canonical UTC, so comparing two as strings compares instants on both backends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.schemas import decode_payload
from gateway.packs.workflow import events as ev
from gateway.packs.workflow.model import (
    Cite,
    FinishRun,
    LinkNodes,
    MessageKind,
    NodeLabel,
    NodeRef,
    Operation,
    PlanStatus,
    RelType,
    ReviseItem,
    Scalar,
    SequenceMessage,
    SetPlanStatus,
    UpsertNode,
    VersionPlan,
    WorkflowChanges,
)


def canonical(timestamp: str) -> str:
    """An RFC 3339 timestamp as UTC with six fractional digits and `Z` (the form of an event's `ts`)."""
    moment = datetime.fromisoformat(timestamp.replace("z", "Z").replace("Z", "+00:00"))
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def as_json(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class _Ops:
    """The operations of one event, all cited to it."""

    def __init__(self, event: Event) -> None:
        self.cite = Cite(event.session, event.seq, event.hash, event.ts)
        self.operations: list[Operation] = []

    def node(
        self,
        label: NodeLabel,
        key: str,
        properties: dict[str, Scalar] | None = None,
        *,
        defines: bool = False,
        kind: MessageKind | None = None,
    ) -> NodeRef:
        ref = NodeRef(label, key)
        props: dict[str, Scalar] = {"id": key, **(properties or {})} if defines else dict(properties or {})
        self.operations.append(
            UpsertNode(node=ref, properties=props, defines=defines, kind=kind, cite=self.cite)
        )
        return ref

    def link(
        self,
        type: RelType,
        source: NodeRef,
        target: NodeRef,
        *,
        each_event: bool = False,
        **properties: Scalar,
    ) -> None:
        props: dict[str, Scalar] = {"at": self.cite.ts, **properties}
        self.operations.append(
            LinkNodes(
                type=type,
                source=source,
                target=target,
                properties=props,
                each_event=each_event,
                cite=self.cite,
            )
        )

    def user(self, name: str) -> NodeRef:
        return self.node("User", name, {"name": name})

    def message(
        self,
        key: str,
        run_id: str | None,
        properties: dict[str, Scalar],
        kind: MessageKind = "message",
    ) -> NodeRef:
        """A message defined by this event; in a run, it is part of it and comes last in its sequence."""
        props: dict[str, Scalar] = {"timestamp": self.cite.ts, "runId": run_id, **properties}
        message = self.node("Message", key, props, defines=True, kind=kind)
        if run_id is not None:
            self.link("PART_OF", message, self.node("WorkflowRun", run_id))
            self.operations.append(SequenceMessage(run=run_id, message=key, cite=self.cite))
        return message


def _item(
    ops: _Ops, label: NodeLabel, key: str, author: str, created_at: str, github_id: int | None
) -> NodeRef:
    """An issue or pull request defined by its opening event, in its repository, by its author."""
    repository = ev.repository_of(key)
    props: dict[str, Scalar] = {
        "number": ev.number_of(key),
        "repository": repository,
        "author": author,
        "createdAt": canonical(created_at),
        "githubId": github_id,
    }
    item = ops.node(label, key, props, defines=True)
    repo = ops.node("Repository", repository, {"name": repository.split("/", 1)[1]})
    ops.link("HAS_ISSUES" if label == "Issue" else "HAS_PRS", repo, item)
    ops.link("BELONGS_TO", item, repo)
    ops.link("CREATED_BY", item, ops.user(author))
    return item


def _revise(ops: _Ops, item: NodeRef, change: ev.Change, at: str) -> None:
    values: dict[str, Scalar] = {
        "title": change.title,
        "body": change.body,
        "state": change.state,
        "labels": change.labels,
        "assignees": change.assignees,
    }
    given: dict[str, Scalar] = {name: value for name, value in values.items() if value is not None}
    if given:
        ops.operations.append(ReviseItem(item=item, values=given, at=canonical(at), cite=ops.cite))


def _repository_seen(ops: _Ops, p: ev.RepositorySeen) -> None:
    repo = ops.node(
        "Repository",
        p.repository,
        {"name": p.repository.split("/", 1)[1], "owner": p.owner, "githubId": p.github_id},
        defines=True,
    )
    ops.link("OWNED_BY", repo, ops.user(p.owner))


def _issue_opened(ops: _Ops, p: ev.IssueOpened) -> None:
    issue = _item(ops, "Issue", p.issue, p.author, p.created_at, p.github_id)
    if p.state is None:
        p = msgspec.structs.replace(p, state="open")
    _revise(ops, issue, p, p.created_at)


def _issue_updated(ops: _Ops, p: ev.IssueUpdated) -> None:
    _revise(ops, ops.node("Issue", p.issue), p, p.updated_at)


def _pull_request_opened(ops: _Ops, p: ev.PullRequestOpened) -> None:
    pull = _item(ops, "PullRequest", p.pull_request, p.author, p.created_at, p.github_id)
    if p.state is None:
        p = msgspec.structs.replace(p, state="open")
    _revise(ops, pull, p, p.created_at)
    for issue in p.resolves:
        ops.link("RESOLVES", pull, ops.node("Issue", issue))
    if p.run_id is not None:
        ops.link("GENERATED_BY", pull, ops.node("WorkflowRun", p.run_id))


def _pull_request_updated(ops: _Ops, p: ev.PullRequestUpdated) -> None:
    _revise(ops, ops.node("PullRequest", p.pull_request), p, p.updated_at)


def _comment_posted(ops: _Ops, p: ev.CommentPosted) -> None:
    label: NodeLabel = "Issue" if p.on == "issue" else "PullRequest"
    item = ops.node(label, p.item)
    comment = ops.message(
        p.comment_id,
        None,
        {"role": "user", "content": p.body, "author": p.author, "timestamp": canonical(p.created_at)},
    )
    ops.link("HAS_COMMENTS", item, comment)
    ops.link("CREATED_BY", comment, ops.user(p.author))
    if label == "Issue":
        ops.link("REFERENCES", comment, item)


def _pull_request_reviewed(ops: _Ops, p: ev.PullRequestReviewed) -> None:
    review = ops.message(
        p.review_id,
        None,
        {
            "role": "user",
            "content": p.body,
            "author": p.reviewer,
            "timestamp": canonical(p.submitted_at),
            "metadata": as_json({"review_state": p.state}),
        },
    )
    ops.link("HAS_COMMENTS", ops.node("PullRequest", p.pull_request), review)
    ops.link("CREATED_BY", review, ops.user(p.reviewer))


def _run_started(ops: _Ops, p: ev.RunStarted) -> None:
    props: dict[str, Scalar] = {
        "workflowType": p.workflow_type,
        "startedAt": ops.cite.ts,
        "status": "running",
        "agent": p.agent,
        "issue": p.issue,
        "metadata": as_json(p.metadata),
    }
    run = ops.node("WorkflowRun", p.run_id, props, defines=True)
    ops.link("EXECUTED_BY", run, ops.node("AIAgent", p.agent, {"name": p.agent}))
    if p.issue is not None:
        ops.link("HAS_RUNS", ops.node("Issue", p.issue), run)


def _run_completed(ops: _Ops, p: ev.RunCompleted) -> None:
    ops.operations.append(FinishRun(run=p.run_id, status=p.status, result=p.result, cite=ops.cite))


def _message_recorded(ops: _Ops, p: ev.MessageRecorded) -> None:
    props: dict[str, Scalar] = {
        "role": p.role,
        "content": p.content,
        "author": p.author,
        "metadata": as_json(p.metadata),
    }
    message = ops.message(p.message_id, p.run_id, props)
    if p.responds_to is not None:
        ops.link("RESPONDS_TO", message, ops.node("Message", p.responds_to))
    for issue in p.references:
        ops.link("REFERENCES", message, ops.node("Issue", issue))


def _tool_called(ops: _Ops, p: ev.ToolCalled) -> None:
    props: dict[str, Scalar] = {
        "role": "tool_call",
        "content": f"{p.tool_name} {as_json(p.parameters)}",
        "toolName": p.tool_name,
        "parameters": as_json(p.parameters),
        "status": "pending",
    }
    ops.message(p.call_id, p.run_id, props, kind="tool_call")


def _tool_returned(ops: _Ops, p: ev.ToolReturned) -> None:
    props: dict[str, Scalar] = {
        "role": "tool_result",
        "content": p.content,
        "isError": p.is_error,
        "errorMessage": p.error_message,
        "callId": p.call_id,
    }
    result = ops.message(p.result_id, p.run_id, props, kind="tool_result")
    call = ops.node("Message", p.call_id, {"status": "error" if p.is_error else "ok"})
    ops.link("HAS_RESULT", call, result)
    ops.link("RESULT_OF", result, call)


def _plan_proposed(ops: _Ops, p: ev.PlanProposed) -> None:
    props: dict[str, Scalar] = {
        "role": "assistant",
        "content": p.content,
        "status": "pending_review",
        "current": True,
        "issue": p.issue,
    }
    plan = ops.message(p.plan_id, p.run_id, props, kind="plan")
    ops.operations.append(VersionPlan(plan=p.plan_id, parent=None, cite=ops.cite))
    ops.link("GENERATED_PLAN", ops.node("WorkflowRun", p.run_id), plan)
    if p.issue is not None:
        ops.link("REFERENCES", plan, ops.node("Issue", p.issue))


def _plan_edited(ops: _Ops, p: ev.PlanEdited) -> None:
    props: dict[str, Scalar] = {
        "role": "user",
        "content": p.content,
        "author": p.edited_by,
        "status": "pending_review",
        "current": True,
        "parentId": p.parent_id,
        "editedAt": ops.cite.ts,
        "editedBy": p.edited_by,
        "editMessage": p.edit_message,
    }
    plan = ops.message(p.plan_id, p.run_id, props, kind="plan")
    ops.operations.append(VersionPlan(plan=p.plan_id, parent=p.parent_id, cite=ops.cite))
    ops.link("EDITS", ops.user(p.edited_by), plan, each_event=True, message=p.edit_message)


def _plan_reviewed(ops: _Ops, p: ev.PlanReviewed) -> None:
    plan = ops.node("Message", p.plan_id)
    reviewer = ops.user(p.reviewer)
    ops.link("REVIEWS", reviewer, plan, each_event=True, verdict=p.verdict, commentId=p.comment_id)
    if p.verdict in ("approved", "rejected"):
        ops.link("APPROVES" if p.verdict == "approved" else "REJECTS", reviewer, plan, each_event=True)
        verdict: PlanStatus = "approved" if p.verdict == "approved" else "rejected"
        ops.operations.append(SetPlanStatus(plan=p.plan_id, status=verdict, cite=ops.cite))
    if p.comment_id is not None and p.comment is not None:
        props: dict[str, Scalar] = {"role": "user", "content": p.comment, "author": p.reviewer}
        comment = ops.message(p.comment_id, None, props, kind="review_comment")
        ops.link("COMMENTS_ON", comment, plan)
        ops.link("CREATED_BY", comment, reviewer)
        if p.suggests_edit:
            ops.link("SUGGESTS_EDIT_TO", comment, plan)


def _plan_implemented(ops: _Ops, p: ev.PlanImplemented) -> None:
    plan = ops.node("Message", p.plan_id)
    ops.operations.append(SetPlanStatus(plan=p.plan_id, status="implemented", cite=ops.cite))
    if p.issue is not None:
        ops.link("IMPLEMENTS", plan, ops.node("Issue", p.issue))
    if p.pull_request is not None:
        ops.link("RESULTS_IN", plan, ops.node("PullRequest", p.pull_request))


_TRANSLATORS: Final[dict[str, Callable[[_Ops, Any], None]]] = {
    "workflow.repository.seen": _repository_seen,
    "workflow.issue.opened": _issue_opened,
    "workflow.issue.updated": _issue_updated,
    "workflow.comment.posted": _comment_posted,
    "workflow.pull_request.opened": _pull_request_opened,
    "workflow.pull_request.updated": _pull_request_updated,
    "workflow.pull_request.reviewed": _pull_request_reviewed,
    "workflow.run.started": _run_started,
    "workflow.run.completed": _run_completed,
    "workflow.message.recorded": _message_recorded,
    "workflow.tool.called": _tool_called,
    "workflow.tool.returned": _tool_returned,
    "workflow.plan.proposed": _plan_proposed,
    "workflow.plan.edited": _plan_edited,
    "workflow.plan.reviewed": _plan_reviewed,
    "workflow.plan.implemented": _plan_implemented,
}
WORKFLOW_TYPES: Final = frozenset(_TRANSLATORS)


def changes(event: Event) -> WorkflowChanges:
    """The operations `event` asks of the workflow read model (none for any other event)."""
    translator = _TRANSLATORS.get(event.type)
    if translator is None:
        return WorkflowChanges(event.session, event.seq, event.hash)
    try:
        payload = decode_payload(event.type, event.payload)
    except EventValidationError:
        return WorkflowChanges(event.session, event.seq, event.hash)
    ops = _Ops(event)
    translator(ops, payload)
    return WorkflowChanges(event.session, event.seq, event.hash, ops.operations)
