"""`OpenEdgeCache`: the open edges of recently touched entities, kept by the store's only writer.

Before resolving a batch, a store reads the open edges of the entities the batch invalidates (to close
them) and of the sources it reasserts relations from. A store is the only writer of its database, so it can
remember, per entity (`identity.entity_key`), the complete set of its open edges: filled when they are read,
and kept up to date from every committed plan (edges created, edges closed, entities created with none).
Evicting an entry only costs a read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

import msgspec

from readmodels.graph.plan import EdgeDemands, RelationRow, WritePlan

DEFAULT_CAPACITY = 50_000
"""Entities remembered (least recently used go first)."""

Fetch = Callable[[EdgeDemands], list[RelationRow]]


class EdgesNotCached(LookupError):
    """Some demanded open edges are not in memory: read them from the database."""


class OpenEdgeCache:
    """Open edges per entity key; an entry, when present, is complete."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._by_entity: OrderedDict[str, dict[str, RelationRow]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_entity)

    def clear(self) -> None:
        self._by_entity.clear()

    def load(self, demands: EdgeDemands, fetch: Fetch) -> list[RelationRow]:
        """The open edges `demands` names, from memory where known, else through `fetch` (the database)."""
        edges: list[RelationRow] = []
        missing = EdgeDemands()
        for uid in sorted(demands.entities):
            known = self._get(uid)
            if known is None:
                missing.entities.add(uid)
            else:
                edges.extend(known.values())
        for wanted, field in ((demands.keys, "key"), (demands.triples, "triple")):
            for uid, value in wanted:
                if uid in demands.entities:
                    continue
                known = self._get(uid)
                if known is None:
                    (missing.keys if field == "key" else missing.triples).add((uid, value))
                else:
                    edges.extend(e for e in known.values() if getattr(e, field) == value)
        if missing.entities or missing.keys or missing.triples:
            fetched = fetch(missing)
            edges.extend(fetched)
            self._remember(missing.entities, fetched)
        return edges

    def known(self, demands: EdgeDemands) -> list[RelationRow]:
        """The open edges `demands` names, all from memory, or `EdgesNotCached`."""
        return self.load(demands, _not_cached)

    def committed(self, plan: WritePlan) -> None:
        """Apply what a committed plan changed: new entities, closed and created edges."""
        for key in sorted(plan.new_keys):
            if key not in self._by_entity:
                self._put(key, {})  # an entity this batch created has no edges but the batch's
        for edge in plan.closed_relations:
            for entity in (edge.source_key, edge.target_key):
                known = self._by_entity.get(entity)
                if known is not None:
                    known.pop(edge.uid, None)
        for edge in plan.new_relations:
            if edge.is_open:
                stored = _as_stored(edge)
                for entity in (edge.source_key, edge.target_key):
                    known = self._by_entity.get(entity)
                    if known is not None:
                        known[stored.uid] = stored

    def _remember(self, entities: Iterable[str], fetched: list[RelationRow]) -> None:
        complete: dict[str, dict[str, RelationRow]] = {entity: {} for entity in entities}
        for edge in fetched:
            for entity in (edge.source_key, edge.target_key):
                if entity in complete:
                    complete[entity][edge.uid] = edge
        for entity, edges in complete.items():
            self._put(entity, edges)

    def _get(self, uid: str) -> dict[str, RelationRow] | None:
        known = self._by_entity.get(uid)
        if known is not None:
            self._by_entity.move_to_end(uid)
        return known

    def _put(self, uid: str, edges: dict[str, RelationRow]) -> None:
        self._by_entity[uid] = edges
        self._by_entity.move_to_end(uid)
        while len(self._by_entity) > self._capacity:
            self._by_entity.popitem(last=False)


def _as_stored(edge: RelationRow) -> RelationRow:
    """The edge as a read of the database would return it (a private copy: resolvers mutate theirs)."""
    return msgspec.structs.replace(edge, loaded_uid=edge.uid, pending=False, discarded=False)


def _not_cached(demands: EdgeDemands) -> list[RelationRow]:
    raise EdgesNotCached(f"{len(demands.entities) + len(demands.keys) + len(demands.triples)} demands")
