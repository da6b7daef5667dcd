"""The workflow pack's MCP tools (entry point `eventloom.mcp_tools` `workflow`): recording a run as it
happens, and the questions of `reads` (`mcp_reads`).

The recording tools append exactly the events the Python recorder does, under the same idempotency keys
(`recording`), so a run recorded over MCP reads back like one recorded in process; each takes the
`session` the run's events go in, so a token's session scope applies to it. Ids a caller does not give
are made up and returned, but only a given id makes a retried call safe: give `message_id`, `call_id`...
and a retry after a timeout returns the first event instead of appending another.

A token limited to some sessions records only into runs and plans of those sessions: a run or a plan that
already holds a record of another session is refused (its reads would otherwise show the other session's
records under this session's citation). That check asks the workflow projector, so it fails closed
(`unavailable`) when none runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from eventloom.event import Event, utc_timestamp
from gateway.access.backend import Backend
from gateway.access.scope import sessions_cited
from gateway.mcp.arguments import Session
from gateway.mcp.caller import current_caller
from gateway.mcp.failures import ToolFailure
from gateway.packs.workflow import events as ev
from gateway.packs.workflow.mcp_reads import reads_of, register_history_tools, register_read_tools
from gateway.packs.workflow.reads import PlanQuestion, SequenceQuestion
from gateway.packs.workflow.recording import build, fresh_id, new_run_id, record

ITEM_PATTERN: Final = ev.ITEM_KEY.pattern

RunId = Annotated[str, Field(min_length=1, max_length=256, description="The run's id.")]
NewId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=256,
        description="This item's id, unique in the deployment; give one to make a retry safe "
        "(default: a new one, returned).",
    ),
]
RefId = Annotated[str, Field(min_length=1, max_length=256)]
ItemKey = Annotated[
    str, Field(pattern=ITEM_PATTERN, description="An issue or pull request: owner/name#number")
]
Content = Annotated[str, Field(max_length=1_000_000)]
Name = Annotated[str, Field(min_length=1, max_length=512)]
Metadata = Annotated[dict[str, Any], Field(description="Anything else worth keeping (a JSON object).")]
Timestamp = Annotated[str | None, Field(max_length=64, description="RFC 3339 (default: now).")]
Role = Annotated[ev.Role, Field(description="Who spoke: user, system or assistant.")]


def register(server: MCPServer, backend: Backend) -> None:
    """Entry point `eventloom.mcp_tools`: the recording tools, then the read tools."""
    register_run_tools(server, backend)
    register_message_tools(server, backend)
    register_result_tools(server, backend)
    register_plan_tools(server, backend)
    register_review_tools(server, backend)
    register_outcome_tools(server, backend)
    register_read_tools(server, backend)
    register_history_tools(server, backend)


async def _record(
    backend: Backend,
    session: str,
    payload: msgspec.Struct,
    *,
    scope: str,
    item: str,
    field: str,
    ignore: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    caller = current_caller()
    if not caller.principal.unrestricted:
        await _refuse_foreign_records(backend, payload)
    event = await record(
        backend.log,
        session,
        caller.actor,
        payload,
        scope=scope,
        item=item,
        field=field,
        principal=caller.recorded_principal,
        ignore=ignore,
    )
    return recorded(event)


async def _refuse_foreign_records(backend: Backend, payload: msgspec.Struct) -> None:
    """A run or plan this record extends must hold no record of a session the caller may not touch."""
    principal = current_caller().principal
    reads = reads_of(backend)
    for field in ("run_id", "plan_id", "parent_id"):
        key = getattr(payload, field, None)
        if not isinstance(key, str):
            continue
        if field == "run_id":
            rows: list[Any] = await reads.sequence(SequenceQuestion(run_id=key))
        else:
            history = await reads.plan(PlanQuestion(plan_id=key))
            rows = [] if history is None else [*history.versions, *history.reviews]
        cited = {session for row in rows for session in sessions_cited(row.citation or "")}
        if not all(principal.may_touch(session) for session in cited):
            raise ToolFailure(
                "forbidden",
                f"{field}: {key!r} holds records of sessions your token may not touch; "
                "record into a run and plan of your own (leave the id out for a new one)",
            )


def recorded(event: Event) -> dict[str, Any]:
    return {"citation": event.citation, "session": event.session, "seq": event.seq, "type": event.type}


def register_run_tools(server: MCPServer, backend: Backend) -> None:
    """A run: its start and its end."""

    @server.tool()
    async def workflow_run_start(
        session: Session,
        workflow_type: Annotated[str, Field(min_length=1, max_length=128, description="e.g. fix-issue")],
        run_id: NewId = None,
        issue: ItemKey | None = None,
        agent: Annotated[str | None, Field(min_length=1, max_length=512)] = None,
        metadata: Metadata = {},  # noqa: B006 (pydantic copies)
    ) -> dict[str, Any]:
        """Start a run of a workflow (usually for an issue) by `agent` (default: your token's name).
        Record its messages, tool calls and plans with the other workflow_ tools, in the same session,
        and end it with workflow_run_complete."""
        run_id = run_id or new_run_id()
        payload = build(
            ev.RunStarted,
            run_id=run_id,
            workflow_type=workflow_type,
            agent=agent or current_caller().principal.name,
            issue=issue,
            metadata=metadata,
        )
        answer = await _record(backend, session, payload, scope=run_id, item="run:started", field="run_id")
        return {"run_id": run_id, **answer}

    @server.tool()
    async def workflow_run_complete(
        session: Session,
        run_id: RunId,
        status: ev.RunStatus = "succeeded",
        result: Annotated[str | None, Field(max_length=1_000_000)] = None,
    ) -> dict[str, Any]:
        """End the run: succeeded, failed or cancelled, with what came of it."""
        payload = build(ev.RunCompleted, run_id=run_id, status=status, result=result)
        answer = await _record(backend, session, payload, scope=run_id, item="run:completed", field="run_id")
        return {"run_id": run_id, **answer}


def register_message_tools(server: MCPServer, backend: Backend) -> None:
    """A run's messages and its tool calls."""

    @server.tool()
    async def workflow_message(
        session: Session,
        run_id: RunId,
        role: Role,
        content: Content,
        message_id: NewId = None,
        author: Annotated[str | None, Field(min_length=1, max_length=512)] = None,
        responds_to: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
        references: Annotated[list[ItemKey], Field(max_length=100)] = [],  # noqa: B006
        metadata: Metadata = {},  # noqa: B006
    ) -> dict[str, Any]:
        """Record the run's next message; `responds_to` names the message it answers, `references` the
        issues it cites."""
        message_id = message_id or fresh_id(run_id, "m")
        payload = build(
            ev.MessageRecorded,
            run_id=run_id,
            message_id=message_id,
            role=role,
            content=content,
            author=author,
            responds_to=responds_to,
            references=references,
            metadata=metadata,
        )
        item = f"message:{message_id}"
        answer = await _record(backend, session, payload, scope=run_id, item=item, field="message_id")
        return {"message_id": message_id, **answer}

    @server.tool()
    async def workflow_tool_call(
        session: Session,
        run_id: RunId,
        tool_name: Name,
        parameters: Metadata = {},  # noqa: B006
        call_id: NewId = None,
    ) -> dict[str, Any]:
        """Record a tool call the run makes; record what it returned with workflow_tool_result."""
        call_id = call_id or fresh_id(run_id, "c")
        payload = build(
            ev.ToolCalled, run_id=run_id, call_id=call_id, tool_name=tool_name, parameters=parameters
        )
        answer = await _record(
            backend, session, payload, scope=run_id, item=f"call:{call_id}", field="call_id"
        )
        return {"call_id": call_id, **answer}


def register_result_tools(server: MCPServer, backend: Backend) -> None:
    """A tool call's result."""

    @server.tool()
    async def workflow_tool_result(
        session: Session,
        run_id: RunId,
        call_id: RefId,
        content: Content = "",
        is_error: bool = False,
        error_message: Annotated[str | None, Field(max_length=1_000_000)] = None,
        result_id: NewId = None,
    ) -> dict[str, Any]:
        """Record what the tool call `call_id` returned (is_error and error_message when it failed)."""
        result_id = result_id or fresh_id(run_id, "r")
        payload = build(
            ev.ToolReturned,
            run_id=run_id,
            call_id=call_id,
            result_id=result_id,
            content=content,
            is_error=is_error,
            error_message=error_message,
        )
        item = f"result:{result_id}"
        answer = await _record(backend, session, payload, scope=run_id, item=item, field="result_id")
        return {"result_id": result_id, **answer}


def register_plan_tools(server: MCPServer, backend: Backend) -> None:
    """A plan: proposed, or edited into its next version."""

    @server.tool()
    async def workflow_plan(
        session: Session,
        run_id: RunId,
        content: Content,
        plan_id: NewId = None,
        parent_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
        original_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
        edited_by: Annotated[str | None, Field(min_length=1, max_length=512)] = None,
        edit_message: Annotated[str | None, Field(max_length=1_000_000)] = None,
        issue: ItemKey | None = None,
    ) -> dict[str, Any]:
        """Propose a plan (version 1, for `issue`), or, given `parent_id`, record the next version of it
        edited by `edited_by` (default: your token's name; `original_id` names version 1). Either is
        pending review until workflow_plan_review approves or rejects it."""
        plan_id = plan_id or fresh_id(run_id, "p")
        payload: msgspec.Struct
        if parent_id is None:
            payload = build(ev.PlanProposed, run_id=run_id, plan_id=plan_id, content=content, issue=issue)
        else:
            payload = build(
                ev.PlanEdited,
                plan_id=plan_id,
                parent_id=parent_id,
                content=content,
                edited_by=edited_by or current_caller().principal.name,
                edit_message=edit_message,
                run_id=run_id,
                original_id=original_id or parent_id,
            )
        answer = await _record(
            backend, session, payload, scope=run_id, item=f"plan:{plan_id}", field="plan_id"
        )
        return {"plan_id": plan_id, **answer}


def register_review_tools(server: MCPServer, backend: Backend) -> None:
    """A review of a plan version."""

    @server.tool()
    async def workflow_plan_review(
        session: Session,
        plan_id: RefId,
        reviewer: Name,
        verdict: ev.Verdict,
        comment: Annotated[str | None, Field(max_length=1_000_000)] = None,
        suggests_edit: bool = False,
        review_id: NewId = None,
        run_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
    ) -> dict[str, Any]:
        """`reviewer` approves, rejects or comments on the plan version `plan_id` (a comment is a review
        comment message with the review's id; `suggests_edit` marks one asking for a change). Give the
        plan's `run_id` to share the recorder's idempotency keys."""
        scope = run_id or plan_id
        review_id = review_id or fresh_id(scope, "v")
        payload = build(
            ev.PlanReviewed,
            plan_id=plan_id,
            reviewer=reviewer,
            verdict=verdict,
            comment_id=None if comment is None else review_id,
            comment=comment,
            suggests_edit=suggests_edit,
        )
        item = f"review:{review_id}"
        answer = await _record(backend, session, payload, scope=scope, item=item, field="review_id")
        return {"review_id": review_id, **answer}


def register_outcome_tools(server: MCPServer, backend: Backend) -> None:
    """What a run led to: the plan carried out, a pull request."""

    @server.tool()
    async def workflow_plan_implemented(
        session: Session,
        plan_id: RefId,
        pull_request: ItemKey | None = None,
        issue: ItemKey | None = None,
        run_id: Annotated[str | None, Field(min_length=1, max_length=256)] = None,
    ) -> dict[str, Any]:
        """The plan version `plan_id` was carried out for `issue`, ending in `pull_request`."""
        payload = build(ev.PlanImplemented, plan_id=plan_id, pull_request=pull_request, issue=issue)
        item = f"implemented:{plan_id}:{pull_request or '-'}"
        answer = await _record(backend, session, payload, scope=run_id or plan_id, item=item, field="plan_id")
        return {"plan_id": plan_id, **answer}

    @server.tool()
    async def workflow_pull_request(
        session: Session,
        run_id: RunId,
        pull_request: ItemKey,
        title: Annotated[str, Field(min_length=1, max_length=2000)],
        author: Annotated[str | None, Field(min_length=1, max_length=512)] = None,
        body: Annotated[str | None, Field(max_length=1_000_000)] = None,
        resolves: Annotated[list[ItemKey], Field(max_length=100)] = [],  # noqa: B006
        created_at: Timestamp = None,
    ) -> dict[str, Any]:
        """The pull request the run opened (by `author`, default your token's name), and the issues it
        resolves; mark the plan it carries out with workflow_plan_implemented."""
        payload = build(
            ev.PullRequestOpened,
            pull_request=pull_request,
            author=author or current_caller().principal.name,
            created_at=created_at or utc_timestamp(),
            resolves=resolves,
            run_id=run_id,
            title=title,
            body=body,
        )
        ignore = frozenset() if created_at else frozenset({"created_at"})
        item = f"pull_request:{pull_request}"
        answer = await _record(
            backend, session, payload, scope=run_id, item=item, field="pull_request", ignore=ignore
        )
        return {"pull_request": pull_request, **answer}
