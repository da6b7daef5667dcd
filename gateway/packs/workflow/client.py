"""`WorkflowClient`: the workflow questions asked of a running node over NATS, from any process.

It implements `WorkflowReads`, so code written against a store works against a node unchanged:

    async with await EventLog.open(settings, persistent=False) as log:
        runs = await WorkflowClient(log.client).issue_runs(IssueRunsQuestion(issue="acme/shop#42"))

Each question goes to `eventloom.q.workflow.<question>` (answered by whichever node runs the `workflow`
projector, from its live store) and each answer is decoded into the view Structs of `reads`. Raises
`MemoryUnavailableError` when no node runs the projector, `QueryError` (naming the field) for a bad
question and `MemoryQueryFailed` when answering failed.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec
from nats.aio.client import Client

from eventloom.position import Position
from gateway.packs.workflow.reads import (
    Implementation,
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    ItemView,
    MessageView,
    PathQuestion,
    PlanHistory,
    PlanQuestion,
    RunsQuestion,
    RunView,
    SequenceQuestion,
    ToolCallsQuestion,
    ToolCallView,
)
from readmodels.query.answers import ask
from readmodels.query.client import DEFAULT_TIMEOUT_S

PROJECTOR: Final = "workflow"
T = TypeVar("T")


class WorkflowClient:
    """A `WorkflowReads` over NATS request/reply (no state of its own)."""

    def __init__(
        self,
        client: Client,
        *,
        projector: str = PROJECTOR,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        after: Position | None = None,
    ) -> None:
        """With `after` (an append's position), every question is answered once the projector applied it."""
        self.client = client
        self.projector = projector
        self.timeout_s = timeout_s
        self.after = after

    async def runs(self, question: RunsQuestion) -> list[RunView]:
        return await self._ask("runs", question, list[RunView])

    async def issue_runs(self, question: IssueRunsQuestion) -> list[RunView]:
        return await self._ask("issue_runs", question, list[RunView])

    async def sequence(self, question: SequenceQuestion) -> list[MessageView]:
        return await self._ask("sequence", question, list[MessageView])

    async def tool_calls(self, question: ToolCallsQuestion) -> list[ToolCallView]:
        return await self._ask("tool_calls", question, list[ToolCallView])

    async def plan(self, question: PlanQuestion) -> PlanHistory | None:
        return await self._ask("plan", question, PlanHistory | None)  # type: ignore[arg-type]

    async def implementation(self, question: IssueQuestion) -> Implementation:
        return await self._ask("implementation", question, Implementation)

    async def item(self, question: ItemQuestion) -> ItemView | None:
        return await self._ask("item", question, ItemView | None)  # type: ignore[arg-type]

    async def path(self, question: PathQuestion) -> list[MessageView]:
        return await self._ask("path", question, list[MessageView])

    async def _ask(self, question: str, request: msgspec.Struct, answer: type[T]) -> T:
        result: Any = await ask(
            self.client, self.projector, question, request, timeout_s=self.timeout_s, after=self.after
        )
        return msgspec.convert(result, answer)
