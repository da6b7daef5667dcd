"""The LadybugDB schema of the workflow read model: typed columns per label, relationship tables, migrations.

LadybugDB has one label per node and a fixed set of columns per table, so every label of
`model.NODE_LABELS` is a node table keyed by `key` with the columns below, and every message (plain, tool
call, tool result, plan, review comment) is a row of `Message` whose `kind` column names what Neo4j
expresses by an extra label (`Message:Plan`...; see `model.KIND_LABELS`). A property that a label has no
column for is refused with an error naming it, as is a relationship between labels its table does not join.
Dict values (metadata, parameters) are JSON text, decoded by the reads.

Columns only the store writes: `WorkflowRun.messageCount` and `lastMessage` (where `SequenceMessage`
appends), `Message.position`, `version`, `originalVersion`, `supersededBy`, the `<property>At` beside each
revisable property of an item, `Revision` rows, and `Message.respondsTo` / `resultId`, the far end of a
message's `RESPONDS_TO` / `HAS_RESULT` (`DENORMALIZED`). Reads go from a primary key along relationships
(a run's messages through `PART_OF`, an issue's runs through `HAS_RUNS`), so no secondary index is needed.
"""

from __future__ import annotations

from typing import Final

from gateway.packs.workflow.model import NODE_LABELS, REL_TYPES, NodeLabel, RelType
from readmodels.graph.migrations import plan_of
from readmodels.graph.protocol import PlannedMigration

CITED: Final = {"session": "STRING", "seq": "INT64", "hash": "STRING"}
REVISABLE: Final = {
    "title": "STRING",
    "body": "STRING",
    "state": "STRING",
    "labels": "STRING[]",
    "assignees": "STRING[]",
}
"""The mutable properties of an issue or pull request (`ReviseItem`), each with its `<property>At`."""

_ITEM: Final = {
    "number": "INT64",
    "repository": "STRING",
    "author": "STRING",
    "createdAt": "STRING",
    "githubId": "INT64",
    **REVISABLE,
    **{f"{name}At": "STRING" for name in REVISABLE},
}
COLUMNS: Final[dict[NodeLabel, dict[str, str]]] = {
    "Repository": {"name": "STRING", "owner": "STRING", "githubId": "INT64"},
    "Issue": _ITEM,
    "PullRequest": _ITEM,
    "User": {"name": "STRING"},
    "AIAgent": {"name": "STRING"},
    "WorkflowRun": {
        "workflowType": "STRING",
        "startedAt": "STRING",
        "completedAt": "STRING",
        "status": "STRING",
        "result": "STRING",
        "agent": "STRING",
        "issue": "STRING",
        "metadata": "STRING",
        "messageCount": "INT64",
        "lastMessage": "STRING",
    },
    "Message": {
        "kind": "STRING",
        "role": "STRING",
        "content": "STRING",
        "timestamp": "STRING",
        "runId": "STRING",
        "position": "INT64",
        "author": "STRING",
        "metadata": "STRING",
        "toolName": "STRING",
        "parameters": "STRING",
        "status": "STRING",
        "callId": "STRING",
        "isError": "BOOLEAN",
        "errorMessage": "STRING",
        "issue": "STRING",
        "version": "INT64",
        "originalVersion": "STRING",
        "parentId": "STRING",
        "supersededBy": "STRING",
        "current": "BOOLEAN",
        "editedAt": "STRING",
        "editedBy": "STRING",
        "editMessage": "STRING",
        "respondsTo": "STRING",
        "resultId": "STRING",
    },
    "Revision": {"item": "STRING", "label": "STRING", "at": "STRING", "values": "STRING"},
}
"""The columns of each node table besides `key`, `id` and the citation (`CITED`)."""

REL_COLUMNS: Final = {
    "at": "STRING",
    "verdict": "STRING",
    "commentId": "STRING",
    "message": "STRING",
    "uid": "STRING",
    **CITED,
}
"""The columns of every relationship table: `at`, the properties links carry, `uid` (one edge per event
when `each_event`) and the citation."""

DENORMALIZED: Final[dict[RelType, str]] = {"RESPONDS_TO": "respondsTo", "HAS_RESULT": "resultId"}
"""The relationships from a message whose target's key is also kept in a column of the message: reading
an optional relationship plans a join over every message (~10 ms at 200,000), reading a column does not."""
_ITEMS: Final[tuple[NodeLabel, ...]] = ("Issue", "PullRequest")
_PEOPLE: Final[tuple[NodeLabel, ...]] = ("User", "AIAgent")
PAIRS: Final[dict[RelType, tuple[tuple[NodeLabel, NodeLabel], ...]]] = {
    "HAS_ISSUES": (("Repository", "Issue"),),
    "HAS_PRS": (("Repository", "PullRequest"),),
    "OWNED_BY": tuple(("Repository", who) for who in _PEOPLE),
    "BELONGS_TO": (*((item, "Repository") for item in _ITEMS), ("Message", "Repository")),
    "CREATED_BY": tuple(
        (source, who) for source in (*_ITEMS, "Message", "WorkflowRun", "Repository") for who in _PEOPLE
    ),
    "HAS_COMMENTS": tuple((item, "Message") for item in _ITEMS),
    "HAS_RUNS": tuple((item, "WorkflowRun") for item in _ITEMS),
    "RESOLVES": (("PullRequest", "Issue"),),
    "GENERATED_BY": (("PullRequest", "WorkflowRun"), ("Message", "WorkflowRun"), ("Message", "AIAgent")),
    "NEXT": (("Message", "Message"),),
    "PART_OF": (("Message", "WorkflowRun"),),
    "EXECUTED_BY": tuple(("WorkflowRun", who) for who in _PEOPLE),
    "HAS_RESULT": (("Message", "Message"),),
    "RESULT_OF": (("Message", "Message"),),
    "GENERATED_PLAN": (("WorkflowRun", "Message"),),
    "PREVIOUS_VERSION": (("Message", "Message"),),
    "REVIEWS": tuple((who, "Message") for who in _PEOPLE),
    "APPROVES": tuple((who, "Message") for who in _PEOPLE),
    "REJECTS": tuple((who, "Message") for who in _PEOPLE),
    "EDITS": tuple((who, "Message") for who in _PEOPLE),
    "IMPLEMENTS": (("Message", "Issue"),),
    "RESULTS_IN": (("Message", "PullRequest"),),
    "RESPONDS_TO": (("Message", "Message"),),
    "REFERENCES": tuple(("Message", item) for item in _ITEMS),
    "COMMENTS_ON": (("Message", "Message"),),
    "SUGGESTS_EDIT_TO": (("Message", "Message"),),
    "HAS_REVISION": tuple((item, "Revision") for item in _ITEMS),
}
"""The (from, to) label pairs each relationship table joins."""


def _columns(types: dict[str, str]) -> str:
    return ", ".join(f"`{name}` {kind}" for name, kind in types.items())


def node_ddl(label: NodeLabel) -> str:
    columns = _columns({"key": "STRING", "id": "STRING", **CITED, **COLUMNS[label]})
    return f"CREATE NODE TABLE IF NOT EXISTS {label}({columns}, PRIMARY KEY(key))"


def rel_ddl(rel: RelType) -> str:
    pairs = ", ".join(f"FROM {source} TO {target}" for source, target in PAIRS[rel])
    return f"CREATE REL TABLE IF NOT EXISTS {rel}({pairs}, {_columns(REL_COLUMNS)})"


_MIGRATION_TABLE: Final = (
    "CREATE NODE TABLE IF NOT EXISTS Migration("
    "name STRING, checksum STRING, statements INT64, applied_at STRING, PRIMARY KEY(name))"
)
CHECKPOINT_TABLE: Final = "WorkflowCheckpoint"
LINKS_TABLE: Final = "WorkflowLink"
"""The key of every relationship kept one per (type, source, target): finding a relationship between two
nodes is a scan in LadybugDB (notably of a transaction's own new ones), a primary key lookup is not."""
_MIGRATIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("0000_migration_table", (_MIGRATION_TABLE,)),
    (
        "0001_workflow",
        (
            *(node_ddl(label) for label in NODE_LABELS),
            *(rel_ddl(rel) for rel in REL_TYPES),
            f"CREATE NODE TABLE IF NOT EXISTS {CHECKPOINT_TABLE}(id STRING, projector STRING, "
            "session STRING, seq INT64, event_hash STRING, PRIMARY KEY(id))",
            f"CREATE NODE TABLE IF NOT EXISTS {LINKS_TABLE}(key STRING, PRIMARY KEY(key))",
        ),
    ),
)


def schema_plan() -> list[PlannedMigration]:
    """The workflow store's migrations, in order, with their checksums (pure)."""
    return plan_of(_MIGRATIONS)
