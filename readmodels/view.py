"""The web view's graph, as plain Structs: what `/v1/graph/*` answers and what a read model contributes.

The core graph (entities, decisions, tasks... of the temporal graph) and every domain pack that declares a
view (entry point group `eventloom.graph_views`: the name is the pack's projector, the value the name of
the question its `Answers` takes a `ViewRequest` on) each answer a `ViewGraph`; the gateway merges them.

Node ids are namespaced by the model that owns them (`graph:...`, `claims:...`, `workflow:...`), so two
models never collide. `system` edges are the memory's own structure (`SUBJECT`, `BASIS`, `SUPERSEDES`,
`CONTRADICTS`, inferred and causal edges): the page draws them dashed, with their `trust` when they have
one; domain edges (`WORKS_AT`, `RESOLVES`...) are drawn solid.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency, after_wait_problem

GRAPH_VIEWS_GROUP: Final = "eventloom.graph_views"
MAX_VIEW_LIMIT: Final = 1000


class ViewRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Nodes around `focus` (a node id, or an entity's name) or matching `search`, or the newest `limit`.

    `sessions`: only what these sessions wrote (None: every session; the gateway passes the sessions
    the caller's token may touch). `as_of`: the graph as it was then (RFC 3339); versions and claims
    superseded by that time are left out, as is everything written after it."""

    sessions: list[str] | None = None
    focus: str | None = None
    search: str | None = None
    as_of: str | None = None
    limit: int = 200
    depth: int = 1

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        if (problem := after_wait_problem(self.after_wait_ms)) is not None:
            raise ValueError(problem)
        if not 1 <= self.limit <= MAX_VIEW_LIMIT:
            raise ValueError(f"limit: must be between 1 and {MAX_VIEW_LIMIT}, got {self.limit}")
        if not 1 <= self.depth <= 3:
            raise ValueError(f"depth: must be between 1 and 3, got {self.depth}")


class ViewVersion(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One version of a node: its window and what it said, cited."""

    valid_from: str | None = None
    valid_to: str | None = None
    properties: dict[str, Any] = msgspec.field(default_factory=dict)
    citation: str | None = None


class ViewNode(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """`kind` picks the colour: entity, observation, claim, resolution, decision, task, event, or a pack's
    own (workflow_run, issue...). `label` is the text drawn beside it."""

    id: str
    kind: str
    label: str
    session: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    superseded: bool = False
    properties: dict[str, Any] = msgspec.field(default_factory=dict)
    citations: list[str] = msgspec.field(default_factory=list)
    versions: list[ViewVersion] = msgspec.field(default_factory=list)


class ViewEdge(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    source: str
    target: str
    type: str
    system: bool = False
    derived: bool = False
    trust: float | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    citation: str | None = None


class ViewGraph(msgspec.Struct, frozen=True, kw_only=True):
    nodes: list[ViewNode] = msgspec.field(default_factory=list)
    edges: list[ViewEdge] = msgspec.field(default_factory=list)

    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""
