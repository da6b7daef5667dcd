"""The workflow projector (entry point `eventloom.projectors` `workflow`): events into the workflow model.

On the default backend (LadybugDB) the model is `workflow.lbug` in a generation directory under
`<data>/readmodels/workflow/`: `eventloom rebuild workflow` builds the next generation and swaps it in.
On Neo4j it lives in the database of `NEO4J_URI` beside the graph and is rebuilt in place (`eventloom
rebuild workflow --backend neo4j`, the live projector stopped meanwhile): cleared, then replayed.

Either way the projector `Answers` the pack's questions (`reads.answer`), so the node that runs it serves
them over NATS (`eventloom.q.workflow.<question>`) from its live store. Like the built-in memory models
it leaves out the gateway's audit session. The stores are imported when a projector is made, so the
pack's package stays light to import.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, Protocol

from eventloom.errors import EventloomError
from gateway.packs.workflow import reads
from gateway.packs.workflow.model import WorkflowChanges
from gateway.packs.workflow.reads import WorkflowReads
from gateway.packs.workflow.translate import changes
from projectors import PluginContext, TrackingProjector
from projectors.generational import GenerationalProjector
from readmodels.tracking import TrackingRecorder

DATABASE: Final = "workflow.lbug"
NAME: Final = "workflow"


class WorkflowStore(TrackingRecorder[WorkflowChanges], WorkflowReads, Protocol):
    """What the projector drives: a store that records `WorkflowChanges` and answers the questions."""


class ClearableWorkflowStore(WorkflowStore, Protocol):
    """A store with no generations (Neo4j), rebuilt in place."""

    async def clear(self) -> None:
        """Delete the model's nodes, relationships and checkpoints."""
        ...


class WorkflowProjector(GenerationalProjector[WorkflowStore, WorkflowChanges]):
    """The model in the live LadybugDB generation (or the one a rebuild fills)."""

    async def answer(self, question: str, body: bytes) -> Any:
        return await reads.answer(self.store, question, body)


class InPlaceWorkflowProjector(TrackingProjector[ClearableWorkflowStore, WorkflowChanges]):
    """The model on Neo4j: one database, so a rebuild clears it and replays the log into it."""

    async def answer(self, question: str, body: bytes) -> Any:
        return await reads.answer(self.store, question, body)

    async def clear(self) -> None:
        await self.store.clear()


def workflow_projector(context: PluginContext) -> WorkflowProjector | InPlaceWorkflowProjector:
    """Entry point: the projector for the configured backend (`EVENTLOOM_GRAPH_BACKEND`)."""
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError(
                "on Neo4j the workflow model has no generations: `eventloom rebuild workflow --backend "
                "neo4j` rebuilds it in place"
            )
        from gateway.packs.workflow.neo4j_store import neo4j_workflow_store  # noqa: PLC0415

        store: ClearableWorkflowStore = neo4j_workflow_store(context.settings)
        return InPlaceWorkflowProjector(context.name, store, changes, context.memory_skips)
    from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore  # noqa: PLC0415
    from readmodels.embedded.graph_store import ladybug_buffer_pool  # noqa: PLC0415

    pool = ladybug_buffer_pool(context.settings)
    return WorkflowProjector(context, DATABASE, partial(LadybugWorkflowStore, buffer_pool_size=pool), changes)
