"""The questions the workflow read model answers, and the shape of each answer (plain Structs on the wire).

Both stores implement `WorkflowReads`; `WorkflowQuestion` and `answer` route a named question (over NATS,
from the CLI, MCP or the Python client) to it. Every row carries `citation`: the `eventloom://` URI of
the event that wrote it.
"""

from __future__ import annotations

from typing import Any, Final, Literal, Protocol, TypeAlias

import msgspec

from gateway.packs.workflow.events import ItemKey

MAX_LIMIT: Final = 1000


class RunView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    run_id: str
    workflow_type: str | None = None
    status: str | None = None  # running until completed: succeeded / failed / cancelled
    result: str | None = None
    started_at: str | None = None
    completed_at: str | None = None
    agent: str | None = None
    issue: str | None = None
    messages: int = 0
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    citation: str | None = None


class MessageView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A message of a run (or a comment); tool calls, results and plans are messages of their own kind."""

    message_id: str
    kind: str  # message, tool_call, tool_result, plan, review_comment
    role: str  # user, system, assistant, tool_call, tool_result
    content: str = ""
    timestamp: str | None = None
    position: int | None = None
    run_id: str | None = None
    author: str | None = None
    responds_to: str | None = None
    tool_name: str | None = None
    parameters: dict[str, Any] | None = None
    call_id: str | None = None  # a tool result: the call it answers
    is_error: bool | None = None
    error_message: str | None = None
    status: str | None = None  # a tool call: pending / ok / error; a plan: its review status
    version: int | None = None  # a plan
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    citation: str | None = None


class ToolCallView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    call: MessageView
    result: MessageView | None = None


class PlanVersionView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    plan_id: str
    version: int
    status: str
    content: str
    current: bool
    original_version: str | None = None
    parent_id: str | None = None
    superseded_by: str | None = None
    run_id: str | None = None
    created_at: str | None = None
    edited_at: str | None = None
    edited_by: str | None = None
    edit_message: str | None = None
    citation: str | None = None


class ReviewView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One entry of a plan's review history: a review (REVIEWS/APPROVES/REJECTS), an edit, or a comment."""

    action: Literal["reviewed", "approved", "rejected", "edited", "commented", "suggested_edit"]
    plan_id: str
    by: str
    at: str
    comment: str | None = None
    comment_id: str | None = None
    citation: str | None = None


class PlanHistory(msgspec.Struct, frozen=True, kw_only=True):
    """Every version of the plan the asked version belongs to (oldest first) and its reviews (in time)."""

    plan_id: str
    current: PlanVersionView | None
    versions: list[PlanVersionView]
    reviews: list[ReviewView]


class PullRequestView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    pull_request: str
    title: str | None = None
    state: str | None = None
    author: str | None = None
    created_at: str | None = None
    run_id: str | None = None  # GENERATED_BY
    citation: str | None = None


class Implementation(msgspec.Struct, frozen=True, kw_only=True):
    """What implemented an issue: its plans marked implemented (IMPLEMENTS), the pull requests they
    resulted in (RESULTS_IN) and those that say they resolve it (RESOLVES), and its runs."""

    issue: str
    plans: list[PlanVersionView]
    pull_requests: list[PullRequestView]
    runs: list[RunView]


class Revision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    at: str
    values: dict[str, Any]
    citation: str | None = None


class ItemView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An issue or pull request: its current properties (latest revision of each wins) and their history."""

    key: str
    label: Literal["Issue", "PullRequest"]
    number: int | None = None
    repository: str | None = None
    author: str | None = None
    created_at: str | None = None
    title: str | None = None
    body: str | None = None
    state: str | None = None
    labels: list[str] = msgspec.field(default_factory=list)
    assignees: list[str] = msgspec.field(default_factory=list)
    history: list[Revision] = msgspec.field(default_factory=list)
    citation: str | None = None


class PathNode(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    message: MessageView


# --- the questions -------------------------------------------------------------------------------------


class RunsQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Runs, newest first: of a workflow type, or of every type."""

    workflow_type: str | None = None
    limit: int = 20


class IssueRunsQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    issue: ItemKey
    limit: int = 20


class SequenceQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A run's messages in order; `conversation` leaves out tool calls and results."""

    run_id: str
    conversation: bool = False


class ToolCallsQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    run_id: str | None = None
    tool: str | None = None
    errors_only: bool = False
    limit: int = 100


class PlanQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    plan_id: str


class IssueQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    issue: ItemKey


class ItemQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    key: ItemKey
    label: Literal["Issue", "PullRequest"] = "Issue"


class PathQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The `NEXT` path from a message (or from the first message of a run, given `run_id`) to the end."""

    message_id: str | None = None
    run_id: str | None = None

    def __post_init__(self) -> None:
        if (self.message_id is None) == (self.run_id is None):
            raise ValueError("give one of `message_id` and `run_id`")


Question: TypeAlias = Literal[
    "runs", "issue_runs", "sequence", "tool_calls", "plan", "implementation", "item", "path"
]


class WorkflowReads(Protocol):
    """What a workflow store answers. `limit`s are checked by `check_limit` before a store sees them."""

    async def runs(self, question: RunsQuestion) -> list[RunView]: ...

    async def issue_runs(self, question: IssueRunsQuestion) -> list[RunView]: ...

    async def sequence(self, question: SequenceQuestion) -> list[MessageView]: ...

    async def tool_calls(self, question: ToolCallsQuestion) -> list[ToolCallView]: ...

    async def plan(self, question: PlanQuestion) -> PlanHistory | None: ...

    async def implementation(self, question: IssueQuestion) -> Implementation: ...

    async def item(self, question: ItemQuestion) -> ItemView | None: ...

    async def path(self, question: PathQuestion) -> list[MessageView]: ...


QUESTIONS: Final[dict[str, type[msgspec.Struct]]] = {
    "runs": RunsQuestion,
    "issue_runs": IssueRunsQuestion,
    "sequence": SequenceQuestion,
    "tool_calls": ToolCallsQuestion,
    "plan": PlanQuestion,
    "implementation": IssueQuestion,
    "item": ItemQuestion,
    "path": PathQuestion,
}


class InvalidQuestion(ValueError):
    """A question that cannot be answered as asked; the message names the field."""


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuestion(f"limit: must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


async def answer(reads: WorkflowReads, question: str, body: bytes) -> Any:
    """Decode `body` as the named question and ask `reads` (raises InvalidQuestion for a bad one)."""
    kind = QUESTIONS.get(question)
    if kind is None:
        raise InvalidQuestion(
            f"question: no workflow question named {question!r} (known: {', '.join(QUESTIONS)})"
        )
    try:
        asked = msgspec.json.decode(body, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidQuestion(str(exc)) from None
    limit = getattr(asked, "limit", None)
    if isinstance(limit, int):
        check_limit(limit)
    method = getattr(reads, question)
    return await method(asked)
