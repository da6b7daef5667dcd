"""The workflow read model's schema on Neo4j: a unique `key` per label, and the indexes its reads use.

Applied at `open()` as named, checksummed migrations of their own (`workflow_...`) through the shared,
concurrency-safe helper (`readmodels.neo4j.schema.apply_migrations`), so several openers at once are fine
and an applied migration is never edited (a change is a new migration). Labels come from the closed sets
of `model` only.

What each read needs: a run, issue, item or message by key (the unique constraints); the runs of a type,
newest first (`workflow_run_type_started`), of every type (`workflow_run_started`); tool calls in time
order (`workflow_tool_call_time`), of one tool (`workflow_tool_call_name_time`) or of a run
(`workflow_tool_call_run`). Each of these indexes also gives its rows in the order asked, so a `LIMIT`
stops early instead of sorting every match. A run's sequence, an issue's runs, a
plan's lineage and reviews, and an item's revisions are reached by relationships from a node found by key.
"""

from __future__ import annotations

from typing import Final

from gateway.packs.workflow.model import NODE_LABELS
from readmodels.graph.migrations import plan_of
from readmodels.graph.protocol import PlannedMigration

CHECKPOINT: Final = "WorkflowCheckpoint"
"""The label of the workflow model's checkpoints: one node per (projector, session)."""
LABELS: Final[tuple[str, ...]] = (*NODE_LABELS, CHECKPOINT)
"""Every label the workflow model writes its nodes under (the kind labels come on top of `Message`)."""

_KEYS: Final = tuple(
    f"CREATE CONSTRAINT workflow_{label.lower()}_key IF NOT EXISTS FOR (n:{label}) REQUIRE n.key IS UNIQUE"
    for label in LABELS
)
_READ_INDEXES: Final = (
    "CREATE INDEX workflow_run_started IF NOT EXISTS FOR (r:WorkflowRun) ON (r.startedAt)",
    "CREATE INDEX workflow_run_type_started IF NOT EXISTS "
    "FOR (r:WorkflowRun) ON (r.workflowType, r.startedAt)",
    "CREATE INDEX workflow_tool_call_name IF NOT EXISTS FOR (m:ToolCall) ON (m.toolName)",
    "CREATE INDEX workflow_tool_call_run IF NOT EXISTS FOR (m:ToolCall) ON (m.runId)",
)
_ORDERED_READS: Final = (  # tool calls in time order, of every tool or of one, without sorting them all
    "CREATE INDEX workflow_tool_call_time IF NOT EXISTS FOR (m:ToolCall) ON (m.timestamp)",
    "CREATE INDEX workflow_tool_call_name_time IF NOT EXISTS FOR (m:ToolCall) ON (m.toolName, m.timestamp)",
)
MIGRATIONS: Final = (
    ("workflow_0001_keys", _KEYS),
    ("workflow_0002_read_indexes", _READ_INDEXES),
    ("workflow_0003_ordered_reads", _ORDERED_READS),
)


def workflow_schema_plan() -> list[PlannedMigration]:
    """The workflow model's migrations, in order, with their checksums. Pure: connects to nothing."""
    return plan_of(MIGRATIONS)
