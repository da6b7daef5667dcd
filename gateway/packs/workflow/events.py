"""The workflow pack's event types: repositories, issues and pull requests, and the runs that serve them.

Every type is registered with the core's schema registry by `register` (entry point
`eventloom.event_types`), so every appender validates it like a built-in type. Identities are chosen by the
recorder: an issue or pull request is `owner/name#number`, a repository `owner/name`; runs, messages, tool
calls and plan versions carry the ids their producer gives them (unique within the deployment).
docs/event-types.md documents each type; docs/workflows.md shows them in use.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Final, Literal, TypeAlias

import msgspec
from msgspec import Meta

from eventloom.schemas import register_event_type
from eventloom.schemas.catalogue_common import Id, Name, Payload, Tag, Timestamp, Title
from gateway.packs.workflow.examples import WORKFLOW_EXAMPLES

REPOSITORY: Final = r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}"
RepositoryKey: TypeAlias = Annotated[str, Meta(pattern=f"^{REPOSITORY}$")]
"""`owner/name`, as GitHub spells it."""
ItemKey: TypeAlias = Annotated[str, Meta(pattern=f"^{REPOSITORY}#[1-9][0-9]{{0,9}}$")]
"""An issue or pull request: `owner/name#number`."""
ITEM_KEY: Final = re.compile(f"^(?P<repository>{REPOSITORY})#(?P<number>[1-9][0-9]{{0,9}})$")

Role: TypeAlias = Literal["user", "system", "assistant"]
"""Who spoke a message; tool traffic has its own events (roles `tool_call` and `tool_result`)."""
RunStatus: TypeAlias = Literal["succeeded", "failed", "cancelled"]
ItemState: TypeAlias = Literal["open", "closed", "merged"]
Verdict: TypeAlias = Literal["approved", "rejected", "commented"]
Content: TypeAlias = Annotated[str, Meta(max_length=1_000_000)]


class Change(Payload, kw_only=True):
    """The mutable properties of an issue or pull request, as of `updated_at`: whatever is given is set."""

    title: Title | None = None
    body: Content | None = None
    state: ItemState | None = None
    labels: list[Tag] | None = None
    assignees: list[Name] | None = None


class RepositorySeen(Payload, kw_only=True):
    """`workflow.repository.seen`: a repository exists (idempotent: seeing it again changes nothing)."""

    repository: RepositoryKey
    owner: Name
    github_id: int | None = None


class IssueOpened(Change, kw_only=True):
    """`workflow.issue.opened`: an issue of a repository, its author and its first properties."""

    issue: ItemKey
    author: Name
    created_at: Timestamp
    github_id: int | None = None


class IssueUpdated(Change, kw_only=True):
    """`workflow.issue.updated`: new values of some of an issue's properties; the latest `updated_at` wins."""

    issue: ItemKey
    updated_at: Timestamp
    actor: Name | None = None


class CommentPosted(Payload, kw_only=True):
    """`workflow.comment.posted`: a comment on an issue or a pull request (a `Message` of role `user`).

    Posting the same `comment_id` again (an edited comment) replaces its body."""

    item: ItemKey
    on: Literal["issue", "pull_request"] = "issue"
    comment_id: Id
    author: Name
    body: Content
    created_at: Timestamp


class PullRequestOpened(Change, kw_only=True):
    """`workflow.pull_request.opened`: a pull request, the issues it resolves and the run that made it."""

    pull_request: ItemKey
    author: Name
    created_at: Timestamp
    resolves: list[ItemKey] = msgspec.field(default_factory=list)
    run_id: Id | None = None
    github_id: int | None = None


class PullRequestUpdated(Change, kw_only=True):
    """`workflow.pull_request.updated`: new property values (merged is a state); the latest wins."""

    pull_request: ItemKey
    updated_at: Timestamp
    actor: Name | None = None


class PullRequestReviewed(Payload, kw_only=True):
    """`workflow.pull_request.reviewed`: a review of a pull request (a comment with the review's state)."""

    pull_request: ItemKey
    review_id: Id
    reviewer: Name
    state: Literal["approved", "changes_requested", "commented", "dismissed"]
    body: Content = ""
    submitted_at: Timestamp


class RunStarted(Payload, kw_only=True):
    """`workflow.run.started`: an agent starts a run of a workflow, usually for an issue."""

    run_id: Id
    workflow_type: Tag
    agent: Name
    issue: ItemKey | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class RunCompleted(Payload, kw_only=True):
    """`workflow.run.completed`: how a run ended."""

    run_id: Id
    status: RunStatus
    result: Content | None = None


class MessageRecorded(Payload, kw_only=True):
    """`workflow.message.recorded`: one message of a run, in order; it may answer another and cite issues."""

    run_id: Id
    message_id: Id
    role: Role
    content: Content
    author: Name | None = None
    responds_to: Id | None = None
    references: list[ItemKey] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolCalled(Payload, kw_only=True):
    """`workflow.tool.called`: the agent calls a tool (a message of role `tool_call`)."""

    run_id: Id
    call_id: Id
    tool_name: Name
    parameters: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolReturned(Payload, kw_only=True):
    """`workflow.tool.returned`: the result of the call `call_id` names (a message of role `tool_result`)."""

    run_id: Id
    call_id: Id
    result_id: Id
    content: Content = ""
    is_error: bool = False
    error_message: Content | None = None

    def __post_init__(self) -> None:
        if self.error_message is not None and not self.is_error:
            raise ValueError("`error_message` is given but `is_error` is false")


class PlanProposed(Payload, kw_only=True):
    """`workflow.plan.proposed`: a run proposes version 1 of a plan, pending review."""

    run_id: Id
    plan_id: Id
    content: Content
    issue: ItemKey | None = None


class PlanEdited(Payload, kw_only=True):
    """`workflow.plan.edited`: a new version `plan_id` of the plan version `parent_id`, pending review.

    `original_id` names version 1 of the lineage (the recorder fills it; absent, the parent is taken for
    it, which is right for a first edit), so a pure reader such as memory search knows the lineage without
    walking the chain: every version of a plan is one memory entity, the newest superseding the rest.
    """

    plan_id: Id
    parent_id: Id
    content: Content
    edited_by: Name
    edit_message: Content | None = None
    run_id: Id | None = None
    original_id: Id | None = None

    def __post_init__(self) -> None:
        if self.plan_id == self.parent_id:
            raise ValueError("`plan_id` must name a new version, not its parent `parent_id`")
        if self.original_id == self.plan_id:
            raise ValueError("`original_id` names version 1 of the lineage, not the new version `plan_id`")


class PlanReviewed(Payload, kw_only=True):
    """`workflow.plan.reviewed`: a reviewer approves, rejects or comments on the plan version `plan_id`.

    A comment is a `Message:ReviewComment`; `suggests_edit` marks one that proposes a change to the plan.
    """

    plan_id: Id
    reviewer: Name
    verdict: Verdict
    comment_id: Id | None = None
    comment: Content | None = None
    suggests_edit: bool = False

    def __post_init__(self) -> None:
        if (self.comment_id is None) != (self.comment is None):
            raise ValueError("`comment` and `comment_id` go together")
        if self.verdict == "commented" and self.comment is None:
            raise ValueError("a `commented` review needs a `comment`")


class PlanImplemented(Payload, kw_only=True):
    """`workflow.plan.implemented`: the plan version `plan_id` was carried out, ending in a pull request."""

    plan_id: Id
    pull_request: ItemKey | None = None
    issue: ItemKey | None = None


WORKFLOW_EVENT_TYPES: Final[dict[str, type[msgspec.Struct]]] = {
    "workflow.repository.seen": RepositorySeen,
    "workflow.issue.opened": IssueOpened,
    "workflow.issue.updated": IssueUpdated,
    "workflow.comment.posted": CommentPosted,
    "workflow.pull_request.opened": PullRequestOpened,
    "workflow.pull_request.updated": PullRequestUpdated,
    "workflow.pull_request.reviewed": PullRequestReviewed,
    "workflow.run.started": RunStarted,
    "workflow.run.completed": RunCompleted,
    "workflow.message.recorded": MessageRecorded,
    "workflow.tool.called": ToolCalled,
    "workflow.tool.returned": ToolReturned,
    "workflow.plan.proposed": PlanProposed,
    "workflow.plan.edited": PlanEdited,
    "workflow.plan.reviewed": PlanReviewed,
    "workflow.plan.implemented": PlanImplemented,
}


def register() -> None:
    """Entry point `eventloom.event_types`: make the pack's types known to the schema registry."""
    for event_type, schema in WORKFLOW_EVENT_TYPES.items():
        register_event_type(event_type, schema, example=WORKFLOW_EXAMPLES[event_type])


def repository_of(item: str) -> str:
    """The `owner/name` of an `owner/name#number` key."""
    match = ITEM_KEY.fullmatch(item)
    if match is None:
        raise ValueError(f"{item!r} is not owner/name#number")
    return match.group("repository")


def number_of(item: str) -> int:
    match = ITEM_KEY.fullmatch(item)
    if match is None:
        raise ValueError(f"{item!r} is not owner/name#number")
    return int(match.group("number"))
