"""`NameCache`: the entity keys under a name, kept by a store that is its database's only writer.

A relation that names an entity without its type ("auth" owned by "team-a") is resolved through every key
of that name in the session. On LadybugDB a name is not a key (only primary keys are indexed), so reading
the keys of a name scans every `EntityKey`: a cost that grows with the graph, paid by nearly every batch.
The names an agent uses are few and come back again and again: remembered here, complete per name, and
kept up to date from every committed plan, they are read once. Evicting an entry only costs a read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping

from readmodels.graph.identity import name_key
from readmodels.graph.plan import WritePlan

DEFAULT_CAPACITY = 50_000
"""Names remembered (least recently used go first)."""


class NameCache:
    """Entity keys per name key; an entry, when present, is every key of that name."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._keys: OrderedDict[str, set[str]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._keys)

    def clear(self) -> None:
        self._keys.clear()

    def split(self, names: Iterable[str]) -> tuple[dict[str, set[str]], list[str]]:
        """The keys of the names known here (copies), and the names to read from the database."""
        known: dict[str, set[str]] = {}
        missing: list[str] = []
        for name in names:
            keys = self._keys.get(name)
            if keys is None:
                missing.append(name)
            else:
                self._keys.move_to_end(name)
                known[name] = set(keys)
        return known, missing

    def remember(self, read: Mapping[str, set[str]]) -> None:
        """Complete key sets just read from the database (a name with no key reads as an empty set)."""
        for name, keys in read.items():
            self._keys[name] = set(keys)
            self._keys.move_to_end(name)
        while len(self._keys) > self._capacity:
            self._keys.popitem(last=False)

    def committed(self, plan: WritePlan) -> None:
        """Add the keys a committed plan created under the names known here."""
        for row in plan.new_entities:
            if row.key in plan.new_keys:
                keys = self._keys.get(name_key(row.session, row.name))
                if keys is not None:
                    keys.add(row.key)
