"""`LadybugRecorder`, the base of the packs' LadybugDB stores: the database is created by the first batch
with something to keep. Until then nothing is on disk, checkpoints are empty, reads answer as an empty
database does, and a batch the pack does not read is applied (harmlessly) without creating anything."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import ladybug
import pytest

from gateway.packs.claims import ladybug_schema as claims_schema
from gateway.packs.claims.ladybug_store import LadybugClaimsStore
from gateway.packs.claims.model import ClaimsChanges
from gateway.packs.claims.reads import (
    AboutQuestion,
    ClaimQuestion,
    ContradictionsQuestion,
    EntityQuestion,
    ObservationsQuestion,
)
from gateway.packs.workflow import ladybug_schema as workflow_schema
from gateway.packs.workflow.ladybug_store import LadybugWorkflowStore
from gateway.packs.workflow.model import WorkflowChanges
from gateway.packs.workflow.reads import (
    IssueQuestion,
    IssueRunsQuestion,
    ItemQuestion,
    PathQuestion,
    PlanQuestion,
    RunsQuestion,
    SequenceQuestion,
    ToolCallsQuestion,
)
from readmodels.embedded.graph_schema import apply_migrations
from readmodels.embedded.ladybug_io import run_rows
from readmodels.embedded.ladybug_recorder import LadybugRecorder
from readmodels.graph.cypher.io import Execute
from readmodels.graph.protocol import PlannedMigration
from readmodels.view import ViewRequest
from tests import claims_support, workflow_support

pytestmark = pytest.mark.anyio
HASH = "ab" * 32
Reads = list[Callable[[Any], Awaitable[object]]]

CLAIMS_READS: Reads = [
    lambda store: store.about(AboutQuestion(entity=claims_support.ALICE)),
    lambda store: store.claim(ClaimQuestion(claim="c-1")),
    lambda store: store.basis(ClaimQuestion(claim="c-1")),
    lambda store: store.contradictions(ContradictionsQuestion()),
    lambda store: store.entity(EntityQuestion(entity=claims_support.ALICE)),
    lambda store: store.observations(ObservationsQuestion(entity=claims_support.ALICE)),
    lambda store: store.view(ViewRequest()),
]
WORKFLOW_READS: Reads = [
    lambda store: store.runs(RunsQuestion()),
    lambda store: store.issue_runs(IssueRunsQuestion(issue=workflow_support.ISSUE)),
    lambda store: store.sequence(SequenceQuestion(run_id="run-1")),
    lambda store: store.tool_calls(ToolCallsQuestion()),
    lambda store: store.plan(PlanQuestion(plan_id="plan-1")),
    lambda store: store.implementation(IssueQuestion(issue=workflow_support.ISSUE)),
    lambda store: store.item(ItemQuestion(key=workflow_support.ISSUE)),
    lambda store: store.path(PathQuestion(run_id="run-1")),
]
PACKS: dict[str, tuple[Callable[[Path], LadybugRecorder[Any]], list[PlannedMigration], Reads]] = {
    "claims": (LadybugClaimsStore, claims_schema.schema_plan(), CLAIMS_READS),
    "workflow": (LadybugWorkflowStore, workflow_schema.schema_plan(), WORKFLOW_READS),
}


def _created_empty(path: Path, plan: list[PlannedMigration]) -> None:
    """A database with the pack's schema and no rows, made without the store."""
    database = ladybug.Database(str(path))
    connection = ladybug.Connection(database)
    try:
        execute: Execute = lambda cypher, params: run_rows(connection, cypher, params)  # noqa: E731
        apply_migrations(execute, plan)
    finally:
        connection.close()
        database.close()


@pytest.mark.parametrize("pack", sorted(PACKS))
async def test_before_its_first_write_a_pack_answers_as_an_empty_database_and_touches_no_disk(
    tmp_path: Path, pack: str
) -> None:
    store_class, plan, reads = PACKS[pack]
    empty = tmp_path / "empty" / "pack.lbug"
    empty.parent.mkdir()
    _created_empty(empty, plan)
    missing = tmp_path / "not-yet" / "pack.lbug"
    async with store_class(missing) as lazy, store_class(empty) as created:
        assert not lazy.created and created.created
        for read in reads:
            assert await read(lazy) == await read(created)
        assert await lazy.applied_seqs(pack, ["s1"]) == {}
        await lazy.idle()
    assert not missing.parent.exists()  # not even the directory


async def test_batches_the_pack_does_not_read_create_nothing_and_may_come_again(tmp_path: Path) -> None:
    path = tmp_path / "claims" / "claims.lbug"
    nothing = [ClaimsChanges("s1", seq, HASH) for seq in (1, 2, 3)] + [ClaimsChanges("s2", 1, HASH)]
    async with LadybugClaimsStore(path) as store:
        assert await store.apply("claims", nothing) == 4
        assert await store.apply("claims", nothing) == 4  # nothing was kept, so nothing is skipped
        assert await store.apply("claims", [*nothing, ClaimsChanges("s1", 2, HASH)]) == 4  # in seq order
        assert not store.created and store.migrations_applied == []
    assert not path.parent.exists()


async def test_the_first_batch_with_operations_creates_the_database_with_every_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "workflow" / "workflow.lbug"
    changes = workflow_support.translated(workflow_support.rocket_story().events)
    assert any(c.operations for c in changes)
    before = [WorkflowChanges("quiet", 1, HASH)]
    async with LadybugWorkflowStore(path) as store:
        assert await store.apply("workflow", before) == 1
        assert not store.created
        batch = [WorkflowChanges("quiet", 2, HASH), *changes]
        assert await store.apply("workflow", batch) == len(batch)
        assert store.created
        assert store.migrations_applied == [plan.name for plan in workflow_schema.schema_plan()]
        last = {c.session: c.seq for c in changes}
        assert await store.applied_seqs("workflow", [*last, "quiet"]) == {**last, "quiet": 2}
        runs = await store.runs(RunsQuestion())
    async with LadybugWorkflowStore(path) as again:
        assert again.created and again.migrations_applied == []
        assert await again.runs(RunsQuestion()) == runs
        assert await again.apply("workflow", changes) == 0


async def test_a_checkpoint_table_that_is_not_a_plain_name_is_refused() -> None:
    def write(execute: Execute, operations: list[object]) -> None:
        raise AssertionError("never written")

    with pytest.raises(ValueError, match=r"checkpoint_table: .*'Pack\) DETACH DELETE'"):
        LadybugRecorder("x.lbug", name="pack", plan=[], checkpoint_table="Pack) DETACH DELETE", write=write)
