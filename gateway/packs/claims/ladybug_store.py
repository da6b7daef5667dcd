"""`LadybugClaimsStore`: the claims read model embedded in LadybugDB (PyPI `ladybug`).

A `LadybugRecorder` of `ClaimsChanges` (one thread, one transaction a batch with its checkpoints, the
database created by the first claim) and a `ClaimsReads`. The schema (ladybug_schema.py) stands for
Neo4j's `Resolution` label by `Claim.kind` and for its relation types by `RELATES.relation`.
"""

from __future__ import annotations

from pathlib import Path

from gateway.packs.claims import ladybug_reads, ladybug_view
from gateway.packs.claims.ladybug_schema import CHECKPOINT_TABLE, schema_plan
from gateway.packs.claims.ladybug_writes import ClaimsWriter
from gateway.packs.claims.model import Operation
from gateway.packs.claims.reads import (
    AboutQuestion,
    BasisChain,
    ClaimQuestion,
    ClaimView,
    ContradictionsQuestion,
    ContradictionView,
    EntityQuestion,
    EntityView,
    ObservationsQuestion,
    ObservationView,
)
from readmodels.embedded.graph_store import DEFAULT_BUFFER_POOL_SIZE
from readmodels.embedded.ladybug_recorder import LadybugRecorder
from readmodels.graph.cypher.io import Execute
from readmodels.view import ViewGraph, ViewRequest


class LadybugClaimsStore(LadybugRecorder[Operation]):
    """The claims read model on an embedded LadybugDB database at `path` (created by the first claim)."""

    def __init__(self, path: str | Path, *, buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE) -> None:
        super().__init__(
            path,
            name="claims",
            plan=schema_plan(),
            checkpoint_table=CHECKPOINT_TABLE,
            write=_write,
            buffer_pool_size=buffer_pool_size,
        )

    # -- reads -------------------------------------------------------------------------------------------

    async def about(self, question: AboutQuestion) -> list[ClaimView]:
        return await self.read(lambda execute: ladybug_reads.about(execute, question))

    async def claim(self, question: ClaimQuestion) -> ClaimView | None:
        return await self.read(lambda execute: ladybug_reads.claim(execute, question))

    async def basis(self, question: ClaimQuestion) -> BasisChain | None:
        return await self.read(lambda execute: ladybug_reads.basis(execute, question))

    async def contradictions(self, question: ContradictionsQuestion) -> list[ContradictionView]:
        return await self.read(lambda execute: ladybug_reads.contradictions(execute, question))

    async def entity(self, question: EntityQuestion) -> EntityView | None:
        return await self.read(lambda execute: ladybug_reads.entity(execute, question))

    async def observations(self, question: ObservationsQuestion) -> list[ObservationView]:
        return await self.read(lambda execute: ladybug_reads.observations(execute, question))

    async def view(self, question: ViewRequest) -> ViewGraph:
        return await self.read(lambda execute: ladybug_view.view(execute, question))


def _write(execute: Execute, operations: list[Operation]) -> None:
    ClaimsWriter(execute).write(operations)
