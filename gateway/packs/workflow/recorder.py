"""Recording made easy: what an agent framework calls for each message and tool call of a run.

    recorder = WorkflowRecorder(log, agent="fixer", repository="octo/widgets")
    async with recorder.run(issue=42, workflow_type="fix-issue") as run:
        asked = await run.message("user", "Fix the crash on empty carts", references=[42])
        async with run.tool("read_file", {"path": "cart.py"}) as call:
            call.result(source)                      # an exception here records an error result
        plan = await run.plan("Guard the empty cart in total()")
        plan = await plan.edit("Guard it and add a test", edited_by="alice")
        await plan.review("alice", "approved")
        pull = await run.pull_request(43, "Guard empty carts")
        await plan.implemented(pull_request=pull.id)

The block appends `workflow.run.started`, then each item as it is recorded, and on leaving it
`workflow.run.completed`: succeeded (or what `run.complete` set), failed with the error when the block
raises (the exception goes on), cancelled when it is cancelled. Ids nobody gives are `<run id>-m<n>`
(messages), `-c<n>` (tool calls), `-r<n>` (results), `-p<n>` (plan versions), `-v<n>` (reviews); every
append carries the idempotency key of `recording`, so a call retried after a timeout records nothing
twice, and a run recorded again under the same run id replays onto the events it already has. Its events
go in the recorder's `session`, or else in the run's own (`recording.session_for`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event, utc_timestamp
from eventloom.log import EventLog
from gateway.packs.workflow import events as ev
from gateway.packs.workflow.recording import (
    build,
    describe,
    finish_after,
    hash_of,
    issue_key,
    new_run_id,
    record,
    session_for,
)

_ID_PREFIX_CHARS: Final = 240


@dataclass(frozen=True)
class Recorded:
    """An item as recorded: its id and the event that defines it."""

    id: str
    event: Event

    @property
    def citation(self) -> str:
        return self.event.citation


@dataclass
class ToolCall:
    """A recorded tool call; in `async with run.tool(...)`, `result` sets what the block's end records."""

    id: str
    tool_name: str
    event: Event
    returned: Recorded | None = None
    _pending: tuple[str, bool, str | None] | None = field(default=None, repr=False)

    @property
    def citation(self) -> str:
        return self.event.citation

    def result(self, content: str = "", *, is_error: bool = False, error_message: str | None = None) -> None:
        self._pending = (content, is_error, error_message)


class PlanVersion:
    """One version of a plan a run proposed: edit it into the next, review it, or mark it implemented."""

    def __init__(self, run: WorkflowRun, id: str, version: int, original_id: str, event: Event) -> None:
        self.run, self.id, self.version, self.original_id, self.event = run, id, version, original_id, event

    @property
    def citation(self) -> str:
        return self.event.citation

    async def edit(
        self, content: str, *, edited_by: str, edit_message: str | None = None, plan_id: str | None = None
    ) -> PlanVersion:
        """The next version, by `edited_by` (pending review again)."""

        def payload(new_id: str) -> msgspec.Struct:
            return build(
                ev.PlanEdited,
                plan_id=new_id,
                parent_id=self.id,
                content=content,
                edited_by=edited_by,
                edit_message=edit_message,
                run_id=self.run.run_id,
                original_id=self.original_id,
            )

        recorded = await self.run._allocate("p", plan_id, "plan", "plan_id", payload)
        return PlanVersion(self.run, recorded.id, self.version + 1, self.original_id, recorded.event)

    async def review(
        self,
        reviewer: str,
        verdict: ev.Verdict,
        *,
        comment: str | None = None,
        suggests_edit: bool = False,
        review_id: str | None = None,
    ) -> Recorded:
        """`reviewer` approves, rejects or comments; a comment is a review comment message with the
        review's id."""

        def payload(new_id: str) -> msgspec.Struct:
            return build(
                ev.PlanReviewed,
                plan_id=self.id,
                reviewer=reviewer,
                verdict=verdict,
                comment_id=None if comment is None else new_id,
                comment=comment,
                suggests_edit=suggests_edit,
            )

        return await self.run._allocate("v", review_id, "review", "review_id", payload)

    async def implemented(
        self, *, pull_request: str | int | None = None, issue: str | int | None = None
    ) -> Recorded:
        """This version was carried out (by default for the run's issue), ending in `pull_request`."""
        run = self.run
        pull = None if pull_request is None else run.key(pull_request, "pull_request")
        target = run.issue if issue is None else run.key(issue, "issue")
        payload = build(ev.PlanImplemented, plan_id=self.id, pull_request=pull, issue=target)
        item = f"implemented:{self.id}:{pull or '-'}"
        return Recorded(self.id, await run._record(payload, item, "plan_id"))


class WorkflowRun:
    """A run in progress (made by `WorkflowRecorder.run`); its appends go one at a time, in order."""

    def __init__(self, recorder: WorkflowRecorder, run_id: str, session: str, issue: str | None) -> None:
        self.recorder, self.run_id, self.session, self.issue = recorder, run_id, session, issue
        self.status: ev.RunStatus = "succeeded"
        self.result: str | None = None
        self.started: Event | None = None
        self.completed: Event | None = None
        self._lock = asyncio.Lock()
        self._counts: dict[str, int] = {}
        self._calls: dict[str, ToolCall] = {}
        self._prefix = run_id if len(run_id) <= _ID_PREFIX_CHARS else f"run{hash_of(run_id)}"

    def key(self, item: str | int, field: str) -> str:
        return issue_key(item, self.recorder.repository, field)

    def complete(self, status: ev.RunStatus, result: str | None = None) -> None:
        """How the run ends when its block ends normally (default: succeeded, no result)."""
        if status not in ("succeeded", "failed", "cancelled"):
            raise EventValidationError("status", f"must be succeeded, failed or cancelled, not {status!r}")
        self.status, self.result = status, result

    async def message(
        self,
        role: ev.Role,
        content: str,
        *,
        responds_to: str | Recorded | None = None,
        references: Iterable[str | int] = (),
        author: str | None = None,
        metadata: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> Recorded:
        """A message of `role` (user, system, assistant); it may answer another and cite issues."""
        answered = responds_to.id if isinstance(responds_to, Recorded) else responds_to
        cited = [self.key(item, "references") for item in references]

        def payload(new_id: str) -> msgspec.Struct:
            return build(
                ev.MessageRecorded,
                run_id=self.run_id,
                message_id=new_id,
                role=role,
                content=content,
                author=author,
                responds_to=answered,
                references=cited,
                metadata=dict(metadata or {}),
            )

        return await self._allocate("m", message_id, "message", "message_id", payload)

    async def tool_call(
        self, tool_name: str, parameters: dict[str, Any] | None = None, *, call_id: str | None = None
    ) -> ToolCall:
        def payload(new_id: str) -> msgspec.Struct:
            return build(
                ev.ToolCalled,
                run_id=self.run_id,
                call_id=new_id,
                tool_name=tool_name,
                parameters=dict(parameters or {}),
            )

        recorded = await self._allocate("c", call_id, "call", "call_id", payload)
        call = self._calls.get(recorded.id) or ToolCall(recorded.id, tool_name, recorded.event)
        self._calls[call.id] = call
        return call

    async def tool_result(
        self,
        call: ToolCall | str,
        content: str = "",
        *,
        is_error: bool = False,
        error_message: str | None = None,
        result_id: str | None = None,
    ) -> Recorded:
        """The result of a call this run made (a ValueError naming `call` for any other)."""
        made = self._calls.get(call.id if isinstance(call, ToolCall) else call)
        if made is None:
            called = call.id if isinstance(call, ToolCall) else call
            raise EventValidationError("call", f"run {self.run_id!r} made no tool call {called!r}")
        if made.returned is not None:
            raise EventValidationError("call", f"{made.id!r} already has a result ({made.returned.citation})")

        def payload(new_id: str) -> msgspec.Struct:
            return build(
                ev.ToolReturned,
                run_id=self.run_id,
                call_id=made.id,
                result_id=new_id,
                content=content,
                is_error=is_error,
                error_message=error_message,
            )

        made.returned = await self._allocate("r", result_id, "result", "result_id", payload)
        return made.returned

    @contextlib.asynccontextmanager
    async def tool(
        self, tool_name: str, parameters: dict[str, Any] | None = None, *, call_id: str | None = None
    ) -> AsyncIterator[ToolCall]:
        """Records the call, then at the block's end its result (`call.result(...)`, else empty), or an
        error result when the block raises (the exception goes on)."""
        call = await self.tool_call(tool_name, parameters, call_id=call_id)
        try:
            yield call
        except BaseException as exc:
            error = describe(exc)
            await finish_after(exc, self.tool_result(call, error, is_error=True, error_message=error))
            raise
        content, is_error, error_message = call._pending or ("", False, None)
        await self.tool_result(call, content, is_error=is_error, error_message=error_message)

    async def plan(
        self, content: str, *, issue: str | int | None = None, plan_id: str | None = None
    ) -> PlanVersion:
        """Version 1 of a plan, pending review (for the run's issue unless `issue` is given)."""
        target = self.issue if issue is None else self.key(issue, "issue")

        def payload(new_id: str) -> msgspec.Struct:
            return build(ev.PlanProposed, run_id=self.run_id, plan_id=new_id, content=content, issue=target)

        recorded = await self._allocate("p", plan_id, "plan", "plan_id", payload)
        return PlanVersion(self, recorded.id, 1, recorded.id, recorded.event)

    async def pull_request(
        self,
        number: str | int,
        title: str,
        *,
        author: str | None = None,
        body: str | None = None,
        resolves: Iterable[str | int] | None = None,
        created_at: str | None = None,
    ) -> Recorded:
        """The pull request this run opened (resolving the run's issue unless `resolves` says otherwise)."""
        pull = self.key(number, "number")
        fixed = [self.key(item, "resolves") for item in resolves] if resolves is not None else None
        payload = build(
            ev.PullRequestOpened,
            pull_request=pull,
            author=author or self.recorder.agent,
            created_at=created_at or utc_timestamp(),
            resolves=fixed if fixed is not None else [self.issue] if self.issue else [],
            run_id=self.run_id,
            title=title,
            body=body,
        )
        ignore = frozenset() if created_at else frozenset({"created_at"})
        event = await self._record(payload, f"pull_request:{pull}", "number", ignore=ignore)
        return Recorded(pull, event)

    async def _allocate(
        self,
        letter: str,
        given: str | None,
        kind: str,
        field: str,
        payload: Callable[[str], msgspec.Struct],
    ) -> Recorded:
        """Record the item with id `given`, or the run's next `<run id>-<letter><n>`; the count moves on
        only once it is recorded, so a call retried after a failure reuses the id (and the key)."""
        async with self._lock:
            count = self._counts.get(letter, 0) + 1
            item_id = given if given is not None else f"{self._prefix}-{letter}{count}"
            event = await self._record_unlocked(payload(item_id), f"{kind}:{item_id}", field)
            if given is None:
                self._counts[letter] = count
        return Recorded(item_id, event)

    async def _record(
        self, payload: msgspec.Struct, item: str, field: str, ignore: frozenset[str] = frozenset()
    ) -> Event:
        async with self._lock:
            return await self._record_unlocked(payload, item, field, ignore)

    async def _record_unlocked(
        self, payload: msgspec.Struct, item: str, field: str, ignore: frozenset[str] = frozenset()
    ) -> Event:
        recorder = self.recorder
        return await record(
            recorder.log,
            self.session,
            recorder.actor,
            payload,
            scope=self.run_id,
            item=item,
            field=field,
            ignore=ignore,
        )

    async def _start(self, workflow_type: str, metadata: dict[str, Any]) -> None:
        payload = build(
            ev.RunStarted,
            run_id=self.run_id,
            workflow_type=workflow_type,
            agent=self.recorder.agent,
            issue=self.issue,
            metadata=metadata,
        )
        self.started = await self._record(payload, "run:started", "run_id")

    async def _finish(self, status: ev.RunStatus, result: str | None) -> None:
        payload = build(ev.RunCompleted, run_id=self.run_id, status=status, result=result)
        self.completed = await self._record(payload, "run:completed", "run_id")


class WorkflowRecorder:
    """Records an agent's runs in `log`, as `agent` (the envelope's actor too, unless `actor` is given);
    a bare issue or pull request number is one of `repository` (owner/name)."""

    def __init__(
        self,
        log: EventLog,
        session: str | None = None,
        agent: str = "agent",
        repository: str | None = None,
        *,
        actor: str | None = None,
    ) -> None:
        if repository is not None and ev.ITEM_KEY.fullmatch(f"{repository}#1") is None:
            raise EventValidationError("repository", f"{repository!r} is not owner/name")
        self.log, self.session, self.agent, self.repository = log, session, agent, repository
        self.actor = actor or agent

    @contextlib.asynccontextmanager
    async def run(
        self,
        issue: str | int | None = None,
        *,
        workflow_type: str,
        run_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> AsyncIterator[WorkflowRun]:
        """Start a run (`workflow.run.started`) and complete it when the block ends; see the module."""
        run_id = run_id if run_id is not None else new_run_id()
        target = None if issue is None else issue_key(issue, self.repository)
        run = WorkflowRun(self, run_id, self.session or session_for(run_id), target)
        await run._start(workflow_type, dict(metadata or {}))
        try:
            yield run
        except BaseException as exc:
            status: ev.RunStatus = "cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"
            await finish_after(exc, run._finish(status, describe(exc)))
            raise
        await run._finish(run.status, run.result)
