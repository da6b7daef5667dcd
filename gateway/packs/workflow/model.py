"""What the workflow read model is asked to write: backend-neutral operations, one list per event.

`translate.changes` turns an event into a `WorkflowChanges`; a store (LadybugDB or Neo4j) applies each
operation in order, in the transaction that also moves its checkpoint. Labels and relationship types
come only from the closed sets below, never from data, so a store may put them into Cypher text.
Every operation carries the citation of its event: what a read returns is cited to the event that wrote it.

On Neo4j a message of a special kind carries a second label (`Message:Plan`, `Message:ReviewComment`,
`Message:ToolCall`, `Message:ToolResult`); on LadybugDB, which has one label per node, every message is a
`Message` row whose `kind` column names it (`KIND_LABELS`). The read API is the same on both.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

NodeLabel: TypeAlias = Literal[
    "Repository", "Issue", "PullRequest", "User", "AIAgent", "WorkflowRun", "Message", "Revision"
]
NODE_LABELS: Final[tuple[NodeLabel, ...]] = (
    "Repository",
    "Issue",
    "PullRequest",
    "User",
    "AIAgent",
    "WorkflowRun",
    "Message",
    "Revision",
)
MessageKind: TypeAlias = Literal["message", "tool_call", "tool_result", "plan", "review_comment"]
KIND_LABELS: Final[dict[MessageKind, str]] = {
    "tool_call": "ToolCall",
    "tool_result": "ToolResult",
    "plan": "Plan",
    "review_comment": "ReviewComment",
}
"""The extra Neo4j label of each special kind of message (a plain message has none)."""

RelType: TypeAlias = Literal[
    "HAS_ISSUES",
    "HAS_PRS",
    "OWNED_BY",
    "BELONGS_TO",
    "CREATED_BY",
    "HAS_COMMENTS",
    "HAS_RUNS",
    "RESOLVES",
    "GENERATED_BY",
    "NEXT",
    "PART_OF",
    "EXECUTED_BY",
    "HAS_RESULT",
    "RESULT_OF",
    "GENERATED_PLAN",
    "PREVIOUS_VERSION",
    "REVIEWS",
    "APPROVES",
    "REJECTS",
    "EDITS",
    "IMPLEMENTS",
    "RESULTS_IN",
    "RESPONDS_TO",
    "REFERENCES",
    "COMMENTS_ON",
    "SUGGESTS_EDIT_TO",
    "HAS_REVISION",
]
REL_TYPES: Final[tuple[RelType, ...]] = RelType.__args__  # type: ignore[attr-defined]

Scalar: TypeAlias = str | int | float | bool | list[str] | None
"""A property value. `None` in an upsert leaves the stored value as it is."""


class Cite(msgspec.Struct, frozen=True, gc=False):
    """The event an operation comes from."""

    session: str
    seq: int
    hash: str
    ts: str  # the event's own timestamp, canonical RFC 3339 UTC


class NodeRef(msgspec.Struct, frozen=True, gc=False):
    label: NodeLabel
    key: str


class UpsertNode(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Create the node if absent (a reference may create a bare one), then set the given properties.

    `defines` marks the event that the node stands for (its `opened`, `started`, `recorded`...): only then
    are the node's citation (`session`, `seq`, `hash`) and `kind` set; a node only referred to so far has
    none. Properties whose value is None are left as they are.
    """

    node: NodeRef
    properties: dict[str, Scalar] = msgspec.field(default_factory=dict)
    defines: bool = False
    kind: MessageKind | None = None  # Message nodes only: what it is (and its Neo4j extra label)
    cite: Cite


class LinkNodes(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """A relationship, both ends created bare if absent.

    One per (type, source, target) unless `each_event`: then one per event (a review history keeps every
    review, a revision every change). Its properties (`at` and any given) and citation are set each time.
    """

    type: RelType
    source: NodeRef
    target: NodeRef
    properties: dict[str, Scalar] = msgspec.field(default_factory=dict)
    each_event: bool = False
    cite: Cite


class ReviseItem(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """New values of an issue's or pull request's mutable properties as of `at`.

    The history keeps every revision (a `Revision` node, `HAS_REVISION` from the item, with the values
    given and the citation). On the item itself each property takes the value of its latest revision by
    `at` (ties: the one applied last), so deliveries that arrive out of order still end right. Each
    property's `at` is kept beside it as `<property>At`.
    """

    item: NodeRef
    values: dict[str, Scalar]
    at: str
    cite: Cite


class SequenceMessage(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Put a message last in its run: `position` = the run's count + 1, and `NEXT` from the run's last
    message (none for the first). A message already positioned is left where it is."""

    run: str
    message: str
    cite: Cite


class VersionPlan(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Make plan version `plan` follow `parent`: `PREVIOUS_VERSION` to it, `version` = its version + 1,
    `originalVersion` = its original (or the parent itself), and the parent marked superseded
    (`supersededBy`, `current` false). A first version gets `version` 1 and itself as original."""

    plan: str
    parent: str | None
    cite: Cite


PlanStatus: TypeAlias = Literal["pending_review", "approved", "rejected", "implemented"]


class SetPlanStatus(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    plan: str
    status: PlanStatus
    cite: Cite


class FinishRun(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Set a run's end: `status`, `result`, `completedAt`."""

    run: str
    status: str
    result: str | None
    cite: Cite


Operation: TypeAlias = (
    UpsertNode | LinkNodes | ReviseItem | SequenceMessage | VersionPlan | SetPlanStatus | FinishRun
)


class WorkflowChanges(msgspec.Struct, frozen=True, gc=False):
    """One event's operations (none for an event the pack does not read), with its place in the log."""

    session: str
    seq: int
    event_hash: str
    operations: list[Operation] = msgspec.field(default_factory=list)
