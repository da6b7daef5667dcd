"""`LadybugRecorder`, the base of the packs' LadybugDB stores: the database is created by the first batch
with something to keep. Until then reads answer as an empty database does, and the batches the pack does
not read leave only their checkpoints, in a small SQLite file that the creating batch copies in."""

from __future__ import annotations

import sqlite3
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
from gateway.packs.workflow.ladybug_batch import write_operations
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
from readmodels.embedded.ladybug_checkpoints import CheckpointPolicy
from readmodels.embedded.ladybug_io import run_rows
from readmodels.embedded.ladybug_recorder import LadybugRecorder
from readmodels.embedded.sqlite_db import CHECKPOINTS_TABLE, save_checkpoints
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


async def test_batches_the_pack_does_not_read_keep_only_their_checkpoints_in_a_small_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "claims" / "claims.lbug"
    nothing = [ClaimsChanges("s1", seq, HASH) for seq in (1, 2, 3)] + [ClaimsChanges("s2", 1, HASH)]
    async with LadybugClaimsStore(path) as store:
        assert await store.apply("claims", nothing) == 4
        assert await store.apply("claims", nothing) == 0  # at or below the checkpoints: skipped
        assert await store.applied_seqs("claims", ["s1", "s2", "s3"]) == {"s1": 3, "s2": 1}
        assert not store.created and store.migrations_applied == []
    assert not path.exists() and store.early_checkpoints.exists()
    async with LadybugClaimsStore(path) as again:  # they outlive the process
        assert await again.applied_seqs("claims", ["s1"]) == {"s1": 3}
        assert await again.applied_seqs("other", ["s1"]) == {}


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
        assert store.created and not store.early_checkpoints.exists()  # copied into the database
        assert store.migrations_applied == [plan.name for plan in workflow_schema.schema_plan()]
        last = {c.session: c.seq for c in changes}
        assert await store.applied_seqs("workflow", [*last, "quiet"]) == {**last, "quiet": 2}
        runs = await store.runs(RunsQuestion())
    async with LadybugWorkflowStore(path) as again:
        assert again.created and again.migrations_applied == []
        assert await again.runs(RunsQuestion()) == runs
        assert await again.apply("workflow", changes) == 0


async def test_checkpoints_left_in_the_file_by_a_crash_are_adopted_at_open(tmp_path: Path) -> None:
    """A crash between creating the database (with the file's checkpoints copied in) and removing the
    file: at the next open the file's checkpoints are copied again, the later of two winning."""
    path = tmp_path / "workflow.lbug"
    changes = workflow_support.translated(workflow_support.rocket_story().events)
    async with LadybugWorkflowStore(path) as store:
        await store.apply("workflow", changes)
    session, last = changes[-1].session, changes[-1].seq
    with sqlite3.connect(path.with_name(path.name + ".checkpoints")) as early:
        early.execute(CHECKPOINTS_TABLE)
        behind, ahead = WorkflowChanges(session, 1, HASH), WorkflowChanges("quiet", 7, HASH)
        save_checkpoints(early, "workflow", [behind, ahead])
    async with LadybugWorkflowStore(path) as store:
        assert await store.applied_seqs("workflow", [session, "quiet"]) == {session: last, "quiet": 7}
        assert not store.early_checkpoints.exists()


async def test_a_checkpoint_table_that_is_not_a_plain_name_is_refused() -> None:
    def write(execute: Execute, operations: list[object]) -> None:
        raise AssertionError("never written")

    with pytest.raises(ValueError, match=r"checkpoint_table: .*'Pack\) DETACH DELETE'"):
        LadybugRecorder("x.lbug", name="pack", plan=[], checkpoint_table="Pack) DETACH DELETE", write=write)


async def test_an_idle_pack_reopens_its_database_after_enough_events(tmp_path: Path) -> None:
    """The engine's buffer pool hands back its pages only when the database closes: after enough events
    an idle pack store checkpoints, then closes and opens it, and keeps everything."""
    policy = CheckpointPolicy(
        1 << 40, 1 << 40, 1 << 40, idle_wal_bytes=1, idle_commits=1, idle_events=1, reopen_events=5
    )
    changes = workflow_support.translated(workflow_support.rocket_story().events)
    assert len(changes) >= 5
    store = LadybugRecorder(
        tmp_path / "workflow.lbug",
        name="workflow",
        plan=workflow_schema.schema_plan(),
        checkpoint_table=workflow_schema.CHECKPOINT_TABLE,
        write=write_operations,
        checkpoints=policy,
    )
    async with store:
        assert await store.apply("workflow", changes) == len(changes)
        assert store.opens == 1
        await store.idle()
        assert store.opens == 2 and store.migrations_applied == []
        last = {c.session: c.seq for c in changes}
        assert await store.applied_seqs("workflow", list(last)) == last
        assert await store.apply("workflow", changes) == 0
        await store.idle()
        assert store.opens == 2  # nothing written since
