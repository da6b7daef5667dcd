"""The nodes a batch of claims operations writes on LadybugDB, held until the batch's end.

A `CREATE` or `SET` of a node with its twenty columns, one statement each, was the largest part of a
batch's time. Held here instead: a node the batch creates is a row (its later changes update the row), a
change to a stored node is a row of the columns changed. At the end of the batch the new nodes are created
a statement per label, and the changes set a statement per label and set of columns, each `LOAD FROM` one
Arrow table (`arrow_rows`, typed by `ladybug_schema`; below `LOAD_CREATES` / `LOAD_MATCHES` rows, a
statement per row). Reading a node (`get`) sees what is held over what is stored, so each operation still
sees what the ones before it wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gateway.packs.claims.ladybug_schema import CITED, COLUMNS
from gateway.packs.claims.model import NodeLabel
from readmodels.embedded.graph_writes import arrow_rows
from readmodels.graph.cypher.io import Execute, Row

LOAD_CREATES: Final = 8
LOAD_MATCHES: Final = 64
"""From how many rows a statement is run once over an Arrow table rather than once per row: `LOAD FROM`
costs ~1 ms to prepare (each table is a new statement), and LadybugDB plans its `MATCH` by key as a join
that scans the table (as `UNWIND` does: workflow's `ladybug_reads._for_each`), where one row's statement
is an index probe (~0.1-0.2 ms). Per row, one event per batch costs what it did before batching."""
_TYPES: Final[dict[NodeLabel, dict[str, str]]] = {
    label: {"key": "STRING", **CITED, **columns} for label, columns in COLUMNS.items()
}


def _checked(label: NodeLabel, values: Row) -> Row:
    unknown = set(values).difference(_TYPES[label])
    if unknown:
        raise ValueError(f"{label}: no such column {sorted(unknown)}")
    return values


class HeldNodes:
    """The nodes a batch creates (`created`) and its changes to stored ones (`changed`), by label and key."""

    def __init__(self, execute: Execute) -> None:
        self.execute = execute
        self.created: dict[NodeLabel, dict[str, Row]] = {label: {} for label in _TYPES}
        self.changed: dict[NodeLabel, dict[str, Row]] = {label: {} for label in _TYPES}

    def get(self, label: NodeLabel, key: str, names: Sequence[str]) -> Row | None:
        """Columns `names` of node `key` as the batch has made it so far (None: no such node)."""
        created = self.created[label].get(key)
        if created is not None:
            return {name: created.get(name) for name in names}
        columns = ", ".join(f"n.`{name}` AS `{name}`" for name in ("key", *names))
        rows = self.execute(f"MATCH (n:{label} {{key: $key}}) RETURN {columns}", {"key": key})
        if not rows:
            return None
        changed = self.changed[label].get(key, {})
        return {name: changed.get(name, rows[0][name]) for name in names}

    def create(self, label: NodeLabel, key: str, values: Row) -> None:
        self.created[label][key] = {**_checked(label, values), "key": key}

    def set(self, label: NodeLabel, key: str, values: Row) -> None:
        """Set `values` (None clears) on node `key`, which exists."""
        _checked(label, values)
        held = self.created[label].get(key)
        if held is None:
            held = self.changed[label].setdefault(key, {})
        held.update(values)

    def delete(self, label: NodeLabel, key: str) -> None:
        """Node `key` and its stored relationships go."""
        if self.created[label].pop(key, None) is None:
            self.changed[label].pop(key, None)
            self.execute(f"MATCH (n:{label} {{key: $key}}) DETACH DELETE n", {"key": key})

    def write(self) -> None:
        """Create the new nodes and set the changes; nothing is held afterwards."""
        for label, created in self.created.items():
            if len(created) >= LOAD_CREATES:
                types = _TYPES[label]
                columns = ", ".join(f"`{name}`: r.`{name}`" for name in types)
                self.execute(
                    f"LOAD FROM $rows CREATE (n:{label} {{{columns}}})",
                    {"rows": arrow_rows(types, list(created.values()))},
                )
            else:
                for row in created.values():
                    given = [name for name, value in row.items() if value is not None]
                    columns = ", ".join(f"`{name}`: $p{i}" for i, name in enumerate(given))
                    params = {f"p{i}": row[name] for i, name in enumerate(given)}
                    self.execute(f"CREATE (n:{label} {{{columns}}})", params)
        for label, changed in self.changed.items():
            by_names: dict[tuple[str, ...], list[Row]] = {}
            for key, values in changed.items():
                by_names.setdefault(tuple(sorted(values)), []).append({**values, "key": key})
            for names, rows in by_names.items():
                self._set(label, names, rows)
        self.created = {label: {} for label in _TYPES}
        self.changed = {label: {} for label in _TYPES}

    def _set(self, label: NodeLabel, names: tuple[str, ...], rows: list[Row]) -> None:
        if len(rows) >= LOAD_MATCHES:
            types = {"key": "STRING", **{name: _TYPES[label][name] for name in names}}
            sets = ", ".join(f"n.`{name}` = r.`{name}`" for name in names)
            self.execute(
                f"LOAD FROM $rows MATCH (n:{label} {{key: r.key}}) SET {sets}",
                {"rows": arrow_rows(types, rows)},
            )
            return
        sets = ", ".join(f"n.`{name}` = $p{i}" for i, name in enumerate(names))
        for row in rows:
            params = {f"p{i}": row[name] for i, name in enumerate(names)}
            self.execute(f"MATCH (n:{label} {{key: $key}}) SET {sets}", {"key": row["key"], **params})
