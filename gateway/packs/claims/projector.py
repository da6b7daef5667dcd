"""The claims projector (entry point `eventloom.projectors` `claims`): events into the claims model.

On the default backend (LadybugDB) the model is `claims.lbug` in a generation directory under
`<data>/readmodels/claims/`: `eventloom rebuild claims` builds the next generation and swaps it in.
On Neo4j it lives in the database of `NEO4J_URI` beside the graph and is rebuilt in place (`eventloom
rebuild claims --backend neo4j`, the live projector stopped meanwhile): cleared, then replayed.

Either way the projector `Answers` the pack's questions (`reads.answer`), so the node that runs it serves
them over NATS (`eventloom.q.claims.<question>`) from its live store. Like the built-in memory models
it leaves out the gateway's audit session. The stores are imported when a projector is made, so the
pack's package stays light to import.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Final, Protocol

from eventloom.errors import EventloomError
from gateway.packs.claims import reads
from gateway.packs.claims.model import ClaimsChanges
from gateway.packs.claims.reads import ClaimsReads
from gateway.packs.claims.translate import changes
from projectors import PluginContext, TrackingProjector
from projectors.generational import GenerationalProjector
from readmodels.tracking import TrackingRecorder

DATABASE: Final = "claims.lbug"
NAME: Final = "claims"


class ClaimsStore(TrackingRecorder[ClaimsChanges], ClaimsReads, Protocol):
    """What the projector drives: a store that records `ClaimsChanges` and answers the questions."""


class ClearableClaimsStore(ClaimsStore, Protocol):
    """A store with no generations (Neo4j), rebuilt in place."""

    async def clear(self) -> None:
        """Delete the model's nodes, relationships and checkpoints."""
        ...


class ClaimsProjector(GenerationalProjector[ClaimsStore, ClaimsChanges]):
    """The model in the live LadybugDB generation (or the one a rebuild fills)."""

    async def answer(self, question: str, body: bytes) -> Any:
        return await reads.answer(self.store, question, body)


class InPlaceClaimsProjector(TrackingProjector[ClearableClaimsStore, ClaimsChanges]):
    """The model on Neo4j: one database, so a rebuild clears it and replays the log into it."""

    async def answer(self, question: str, body: bytes) -> Any:
        return await reads.answer(self.store, question, body)

    async def clear(self) -> None:
        await self.store.clear()


def claims_projector(context: PluginContext) -> ClaimsProjector | InPlaceClaimsProjector:
    """Entry point: the projector for the configured backend (`EVENTLOOM_GRAPH_BACKEND`)."""
    if context.settings.graph_backend == "neo4j":
        if context.generation is not None:
            raise EventloomError(
                "on Neo4j the claims model has no generations: `eventloom rebuild claims --backend "
                "neo4j` rebuilds it in place"
            )
        from gateway.packs.claims.neo4j_store import neo4j_claims_store  # noqa: PLC0415

        store: ClearableClaimsStore = neo4j_claims_store(context.settings)
        return InPlaceClaimsProjector(context.name, store, changes, context.memory_skips)
    from gateway.packs.claims.ladybug_store import LadybugClaimsStore  # noqa: PLC0415
    from readmodels.embedded.graph_store import ladybug_buffer_pool  # noqa: PLC0415

    pool = ladybug_buffer_pool(context.settings)
    return ClaimsProjector(context, DATABASE, partial(LadybugClaimsStore, buffer_pool_size=pool), changes)
