"""`LadybugWorkflowStore`: the workflow read model embedded in LadybugDB (PyPI `ladybug`).

A `LadybugRecorder` of `WorkflowChanges` (one thread, one transaction a batch with its checkpoints, the
database created by the first workflow event) and a `WorkflowReads`. The schema (ladybug_schema.py) stands
for Neo4j's extra labels by `Message.kind`.
"""

from __future__ import annotations

from pathlib import Path

from gateway.packs.workflow import ladybug_reads
from gateway.packs.workflow.ladybug_batch import write_operations
from gateway.packs.workflow.ladybug_schema import CHECKPOINT_TABLE, schema_plan
from gateway.packs.workflow.model import Operation
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
from readmodels.embedded.graph_store import DEFAULT_BUFFER_POOL_SIZE
from readmodels.embedded.ladybug_recorder import LadybugRecorder


class LadybugWorkflowStore(LadybugRecorder[Operation]):
    """The workflow read model on an embedded LadybugDB database at `path` (created by the first workflow
    event)."""

    def __init__(self, path: str | Path, *, buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE) -> None:
        super().__init__(
            path,
            name="workflow",
            plan=schema_plan(),
            checkpoint_table=CHECKPOINT_TABLE,
            write=write_operations,
            buffer_pool_size=buffer_pool_size,
        )

    # -- reads -------------------------------------------------------------------------------------------

    async def runs(self, question: RunsQuestion) -> list[RunView]:
        return await self.read(lambda execute: ladybug_reads.runs(execute, question))

    async def issue_runs(self, question: IssueRunsQuestion) -> list[RunView]:
        return await self.read(lambda execute: ladybug_reads.issue_runs(execute, question))

    async def sequence(self, question: SequenceQuestion) -> list[MessageView]:
        return await self.read(lambda execute: ladybug_reads.sequence(execute, question))

    async def tool_calls(self, question: ToolCallsQuestion) -> list[ToolCallView]:
        return await self.read(lambda execute: ladybug_reads.tool_calls(execute, question))

    async def plan(self, question: PlanQuestion) -> PlanHistory | None:
        return await self.read(lambda execute: ladybug_reads.plan(execute, question))

    async def implementation(self, question: IssueQuestion) -> Implementation:
        return await self.read(lambda execute: ladybug_reads.implementation(execute, question))

    async def item(self, question: ItemQuestion) -> ItemView | None:
        return await self.read(lambda execute: ladybug_reads.item(execute, question))

    async def path(self, question: PathQuestion) -> list[MessageView]:
        return await self.read(lambda execute: ladybug_reads.path(execute, question))
