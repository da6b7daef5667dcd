"""Resolving a whole log for an empty store, so that every row is written once, in its final form.

Incremental projection reads what a batch touches from the store, resolves, and writes changes: closing
a version or an edge is an update of a row written earlier. A rebuild starts from nothing, so the
resolution state (the latest version of every entity, names, open edges) can stay in memory, bounded by
the size of the live graph rather than of the log, and rows are handed out only once nothing can change
them any more. Rows that may still change (open versions and edges, sessions, entity keys, sources,
checkpoints) are held back until `finish`. The rules are `versioning.Resolver`'s, unchanged: it gives the
same graph whatever the batch boundaries, so a bulk-loaded graph equals an incrementally built one.
"""

from __future__ import annotations

from collections.abc import Sequence

from readmodels.graph.model import EventProjection
from readmodels.graph.plan import Snapshot, WritePlan
from readmodels.graph.versioning import Resolver


class BulkPlanner:
    """Feeds a log, in order, through one `Resolver`; `take_finished` and `finish` hand out the rows."""

    def __init__(self) -> None:
        self._resolver = Resolver(Snapshot())
        self._held = 0  # rows resolved since the last hand-out

    @property
    def held_rows(self) -> int:
        """Roughly how many rows are waiting in memory (a hint for when to call `take_finished`)."""
        return self._held

    @property
    def applied(self) -> dict[str, int]:
        """The last seq resolved per session."""
        return {session: seq for session, (seq, _) in self._resolver.plan.applied.items()}

    def add(self, projections: Sequence[EventProjection]) -> None:
        """Resolve the next projections (per session in seq order, after everything added before)."""
        plan = self._resolver.plan
        before = len(plan.events) + len(plan.new_entities) + len(plan.new_relations)
        self._resolver.resolve(projections)
        self._held += len(plan.events) + len(plan.new_entities) + len(plan.new_relations) - before

    def take_finished(self) -> WritePlan:
        """The rows no later event can change; the planner keeps the rest.

        Closed versions and edges are final, and so is everything that only points at a row by its uid
        (spine, version links, projections, citations, observations).
        """
        plan = self._resolver.plan
        finished = WritePlan(
            events=plan.events,
            new_entities=[row for row in plan.new_entities if not row.is_open],
            version_links=plan.version_links,
            new_relations=[edge for edge in plan.new_relations if not edge.is_open and not edge.discarded],
            projected_entities=plan.projected_entities,
            projected_relations=plan.projected_relations,
            event_citations=plan.event_citations,
            entity_citations=plan.entity_citations,
            observations=plan.observations,
        )
        self._resolver.plan = WritePlan(
            sessions=plan.sessions,
            new_entities=[row for row in plan.new_entities if row.is_open],
            new_relations=[edge for edge in plan.new_relations if edge.is_open and not edge.discarded],
            sources=plan.sources,
            applied=plan.applied,
            new_keys=plan.new_keys,
        )
        self._held = len(self._resolver.plan.new_entities) + len(self._resolver.plan.new_relations)
        return finished

    def finish(self) -> WritePlan:
        """Every row not handed out yet, including sessions, entity keys (`heads`) and checkpoints.

        The planner is spent afterwards.
        """
        plan = self._resolver.resolve(())  # settles `heads` and drops discarded edges
        self._held = 0
        return plan
