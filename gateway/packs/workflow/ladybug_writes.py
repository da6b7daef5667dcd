"""The statements the LadybugDB workflow store writes with: many rows each, every value a parameter.

Each writing statement scans its rows from an Arrow table (`LOAD FROM $rows`, typed by the schema's
columns, so a column null in every row still has its type) and finds its nodes by `MATCH` on the primary
key, one `MATCH` per node (a pattern of two plans a cross product), after `missing_nodes` told which to
`CREATE`. Not `MERGE`: within one statement LadybugDB drops a row that merges a key an earlier row created,
and a batched `MERGE` costs tens of milliseconds. A statement never writes one node twice (`Writes` holds
one row per key): a later row does not see an earlier row's writes. Labels and relationship types come
only from the closed sets of `model` (checked against `ladybug_schema`), property names only from the
schema's columns. The caller holds the transaction.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from gateway.packs.workflow.ladybug_schema import CITED, COLUMNS, PAIRS, REL_COLUMNS
from gateway.packs.workflow.model import Cite, LinkNodes, NodeLabel, Scalar
from readmodels.embedded.graph_writes import arrow_rows
from readmodels.graph.cypher.io import Execute, Row

LINK_PROPERTIES: Final = ("at", "verdict", "commentId", "message")
ENDS: Final = {"a": "STRING", "b": "STRING"}
NODE_TYPES: Final[dict[NodeLabel, dict[str, str]]] = {
    label: {"key": "STRING", "id": "STRING", **CITED, **columns} for label, columns in COLUMNS.items()
}
"""Every column of each node table, with its type."""


class WorkflowWriteError(ValueError):
    """An operation this store cannot write as given; the message names the field."""


def cite(cite: Cite) -> dict[str, Any]:
    return {"session": cite.session, "seq": cite.seq, "hash": cite.hash}


def checked(label: NodeLabel, name: str, value: Scalar | dict[str, Any]) -> Any:
    """`value` as the column `label.name` stores it (a dict as JSON text), or a clear error."""
    kind = COLUMNS[label].get(name)
    if kind is None and name != "id":
        raise WorkflowWriteError(
            f"{label}.{name}: no such property on LadybugDB (known: {sorted(COLUMNS[label])})"
        )
    if isinstance(value, dict):
        value = json.dumps(value, sort_keys=True, separators=(",", ":"))
    fits = {
        "INT64": isinstance(value, int) and not isinstance(value, bool),
        "BOOLEAN": isinstance(value, bool),
        "STRING[]": isinstance(value, list) and all(isinstance(item, str) for item in value),
    }.get(kind or "STRING", isinstance(value, str))
    if not fits:
        raise WorkflowWriteError(f"{label}.{name}: expected {kind or 'STRING'}, got {value!r}")
    return value


def link_properties(op: LinkNodes) -> dict[str, Any]:
    """The relationship's columns `op` sets (a None value clears one), or a clear error."""
    source, target = op.source.label, op.target.label
    if (source, target) not in PAIRS[op.type]:
        raise WorkflowWriteError(f"{op.type}: no relationship from {source} to {target} on LadybugDB")
    for name, value in op.properties.items():
        if name not in LINK_PROPERTIES:
            raise WorkflowWriteError(f"{op.type}.{name}: no such relationship property on LadybugDB")
        if value is not None and not isinstance(value, str):
            raise WorkflowWriteError(f"{op.type}.{name}: expected STRING, got {value!r}")
    return {**op.properties, **cite(op.cite)}


def load(execute: Execute, statement: str, types: Mapping[str, str], rows: list[Row]) -> None:
    """Run `statement` once over `rows` (each a struct `r` of the columns `types` names)."""
    if rows:
        execute(f"LOAD FROM $rows {statement}", {"rows": arrow_rows(types, rows)})


def missing_nodes(execute: Execute, refs: Iterable[tuple[NodeLabel, str]]) -> dict[NodeLabel, set[str]]:
    """The keys among `refs` of the nodes that do not exist yet, by label."""
    wanted: dict[NodeLabel, dict[str, None]] = {}
    for label, key in refs:
        wanted.setdefault(label, {})[key] = None
    missing: dict[NodeLabel, set[str]] = {}
    for label, keys in wanted.items():
        found = execute(
            f"UNWIND $keys AS k MATCH (n:{label} {{key: k}}) RETURN n.key AS key", {"keys": list(keys)}
        )
        missing[label] = set(keys).difference(str(row["key"]) for row in found)
    return missing


def create_nodes(execute: Execute, label: NodeLabel, values: Mapping[str, Row]) -> None:
    """A node per key (key -> {column: value}) with its columns, the others null."""
    rows = [{"key": key, **columns} for key, columns in values.items()]
    names = sorted({name for row in rows for name in row if name != "key"})
    types = NODE_TYPES[label]
    columns = "".join(f", `{name}`: r.`{name}`" for name in names)
    load(
        execute,
        f"CREATE (n:{label} {{key: r.key{columns}}})",
        {"key": "STRING", **{name: types[name] for name in names}},
        rows,
    )


def stored(execute: Execute, label: NodeLabel, keys: Iterable[str], names: list[str]) -> dict[str, Row]:
    """key -> {name: stored value} of the (existing) nodes of `label` among `keys`."""
    wanted = list(dict.fromkeys(keys))
    columns = ", ".join(f"n.`{name}` AS `{name}`" for name in names)
    rows = execute(
        f"UNWIND $keys AS k MATCH (n:{label} {{key: k}}) RETURN n.key AS key, {columns}", {"keys": wanted}
    )
    found = {str(row["key"]): {name: row[name] for name in names} for row in rows}
    return {key: found.get(key, dict.fromkeys(names)) for key in wanted}


def set_nodes(execute: Execute, label: NodeLabel, values: Mapping[str, Row]) -> None:
    """Set the given columns of each node (key -> {column: value}, no value None) in one statement: a
    column a row does not give keeps its value."""
    rows = [{"key": key, **columns} for key, columns in values.items() if columns]
    names = sorted({name for row in rows for name in row if name != "key"})
    types = NODE_TYPES[label]
    sets = ", ".join(f"n.`{name}` = coalesce(r.`{name}`, n.`{name}`)" for name in names)
    load(
        execute,
        f"MATCH (n:{label} {{key: r.key}}) SET {sets}",
        {"key": "STRING", **{name: types[name] for name in names}},
        rows,
    )


class Writes:
    """What a batch writes, held until its end (`write`): the nodes it creates (`new`, each with its final
    columns), the columns it sets on the others (one statement per label) and the relationships it
    creates (one statement per type and labels); and what is stored as of now, the database under what is
    held. Columns set on relationships that exist already are written at once (to what is held as well)."""

    def __init__(self, execute: Execute, new: dict[NodeLabel, set[str]]) -> None:
        self.execute = execute
        self.new = new
        self.held: dict[NodeLabel, dict[str, Row]] = {}
        self.edges: dict[tuple[str, tuple[str, str]], list[Row]] = {}

    def set_nodes(self, label: NodeLabel, values: Mapping[str, Row]) -> None:
        held = self.held.setdefault(label, {})
        for key, columns in values.items():
            held.setdefault(key, {}).update(columns)

    def stored(self, label: NodeLabel, keys: Iterable[str], names: list[str]) -> dict[str, Row]:
        wanted = list(dict.fromkeys(keys))
        new = self.new.get(label, set())
        found = stored(self.execute, label, [key for key in wanted if key not in new], names)
        held = self.held.get(label, {})
        values: dict[str, Row] = {}
        for key in wanted:
            values[key] = found.get(key, dict.fromkeys(names))
            values[key].update((name, value) for name, value in held.get(key, {}).items() if name in names)
        return values

    def create_edges(self, rel: str, ends: tuple[str, str], rows: list[Row]) -> None:
        self.edges.setdefault((rel, ends), []).extend(rows)

    def update_edges(self, rel: str, ends: tuple[str, str], rows: list[Row]) -> None:
        for row in rows:
            for held in self.edges.get((rel, ends), []):
                if (held["a"], held["b"]) == (row["a"], row["b"]):
                    held.update(row)
        update_edges(self.execute, rel, ends, rows)

    def existing_edges(
        self, rel: str, ends: tuple[str, str], pairs: Iterable[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        wanted = set(pairs)
        held = {(row["a"], row["b"]) for row in self.edges.get((rel, ends), [])}
        return existing_edges(self.execute, rel, ends, wanted) | (held & wanted)

    def write(self) -> None:
        for label, keys in self.new.items():
            held = self.held.get(label, {})
            create_nodes(self.execute, label, {key: held.get(key, {}) for key in sorted(keys)})
        for label, values in self.held.items():
            new = self.new.get(label, set())
            set_nodes(self.execute, label, {key: row for key, row in values.items() if key not in new})
        for (rel, ends), rows in self.edges.items():
            create_edges(self.execute, rel, ends, rows)


_ENDS: Final = "MATCH (a:{source} {{key: r.a}}) MATCH (b:{target} {{key: r.b}})"
"""Both ends of a relationship by their keys: one `MATCH` each, so each is a primary key lookup (one
pattern of two nodes plans a cross product of both tables)."""


def _edge_sets(rows: list[Row]) -> tuple[dict[str, str], str]:
    names = sorted({name for row in rows for name in row}.difference(ENDS))
    sets = ", ".join(f"e.`{name}` = r.`{name}`" for name in names)
    return {**ENDS, **{name: REL_COLUMNS[name] for name in names}}, sets


def create_edges(execute: Execute, rel: str, ends: tuple[str, str], rows: list[Row]) -> None:
    """A new relationship `rel` per row, from node `a` to node `b` (labels `ends`), with its columns
    (given in the pattern: a `SET` after it costs twice as much)."""
    if rows:
        types, _ = _edge_sets(rows)
        columns = ", ".join(f"`{name}`: r.`{name}`" for name in types if name not in ENDS)
        source, target = ends
        load(
            execute,
            f"{_ENDS.format(source=source, target=target)} CREATE (a)-[e:{rel} {{{columns}}}]->(b)",
            types,
            rows,
        )


def update_edges(execute: Execute, rel: str, ends: tuple[str, str], rows: list[Row]) -> None:
    """Set the given columns of the relationships `rel` from `a` to `b`, one statement per set of columns."""
    by_columns: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        by_columns.setdefault(tuple(sorted(row)), []).append(row)
    source, target = ends
    for group in by_columns.values():
        types, sets = _edge_sets(group)
        load(
            execute,
            f"{_ENDS.format(source=source, target=target)} MATCH (a)-[e:{rel}]->(b) SET {sets}",
            types,
            group,
        )


def existing_edges(
    execute: Execute, rel: str, ends: tuple[str, str], pairs: Iterable[tuple[str, str]]
) -> set[tuple[str, str]]:
    """The (a, b) among `pairs` that a relationship `rel` already joins."""
    rows = [{"a": a, "b": b} for a, b in dict.fromkeys(pairs)]
    if not rows:
        return set()
    source, target = ends
    found = execute(
        f"UNWIND $rows AS r {_ENDS.format(source=source, target=target)} MATCH (a)-[:{rel}]->(b) "
        "RETURN DISTINCT a.key AS a, b.key AS b",
        {"rows": rows},
    )
    return {(str(row["a"]), str(row["b"])) for row in found}
