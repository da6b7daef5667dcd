"""The relationships a batch of claims operations creates on LadybugDB, held until the batch's end.

One `MATCH`, `MATCH`, `CREATE` per relationship was two thirds of a batch's statements (with the key kept in
`LINKS_TABLE`, three). Held here instead, they are created at the end of the batch (after `ladybug_nodes`
has written the nodes), a statement per type, pair of labels and set of columns, each `LOAD FROM` one Arrow
table (`arrow_rows`; below `ladybug_nodes.LOAD_MATCHES` rows, a statement per row), and their keys in one
statement. A relationship exists if its key is stored or held.

Nothing in a batch reads relationships but `ladybug_writes` folding an observation placeholder into the
claim of its key: the `BASIS` links it holds to that placeholder are moved (`retarget`), the stored ones
read and re-linked as before.
"""

from __future__ import annotations

from typing import Final

import msgspec

from gateway.packs.claims.ladybug_nodes import LOAD_MATCHES
from gateway.packs.claims.ladybug_schema import LINKS_TABLE, REL_COLUMNS
from gateway.packs.claims.model import NodeLabel
from readmodels.embedded.graph_writes import arrow_rows
from readmodels.graph.cypher.io import Execute, Row

_ENDS: Final = {"a": "STRING", "b": "STRING"}


class HeldLink(msgspec.Struct, gc=False):
    rel: str
    source: tuple[NodeLabel, str]
    target: tuple[NodeLabel, str]
    values: Row  # the columns given (none null), all in `REL_COLUMNS`


class HeldLinks:
    """The relationships (by key in `LINKS_TABLE`) a batch creates, in the order it made them."""

    def __init__(self, execute: Execute) -> None:
        self.execute = execute
        self.held: dict[str, HeldLink] = {}

    def exists(self, key: str) -> bool:
        if key in self.held:
            return True
        return bool(self.execute(f"MATCH (l:{LINKS_TABLE} {{key: $key}}) RETURN l.key AS key", {"key": key}))

    def hold(self, key: str, link: HeldLink) -> None:
        self.held[key] = link

    def retarget(self, rel: str, old: tuple[NodeLabel, str], new: tuple[NodeLabel, str]) -> int:
        """Held links `rel` to node `old` now go to `new` (how many did)."""
        moved = 0
        for link in self.held.values():
            if link.rel == rel and link.target == old:
                link.target = new
                moved += 1
        return moved

    def write(self) -> None:
        """Create every held relationship, and its key; nothing is held afterwards."""
        groups: dict[tuple[str, NodeLabel, NodeLabel, tuple[str, ...]], list[Row]] = {}
        for link in self.held.values():
            group = (link.rel, link.source[0], link.target[0], tuple(sorted(link.values)))
            groups.setdefault(group, []).append({"a": link.source[1], "b": link.target[1], **link.values})
        for (rel, source, target, names), rows in groups.items():
            ends = f"MATCH (a:{source} {{key: $a}}) MATCH (b:{target} {{key: $b}}) "
            if len(rows) < LOAD_MATCHES:
                columns = ", ".join(f"`{name}`: $p{i}" for i, name in enumerate(names))
                for row in rows:
                    values = {f"p{i}": row[name] for i, name in enumerate(names)}
                    self.execute(
                        f"{ends}CREATE (a)-[:{rel} {{{columns}}}]->(b)",
                        {"a": row["a"], "b": row["b"], **values},
                    )
                continue
            columns = ", ".join(f"`{name}`: r.`{name}`" for name in names)
            types = {**_ENDS, **{name: REL_COLUMNS[name] for name in names}}
            self.execute(
                f"LOAD FROM $rows {ends.replace('$a', 'r.a').replace('$b', 'r.b')}"
                f"CREATE (a)-[:{rel} {{{columns}}}]->(b)",
                {"rows": arrow_rows(types, rows)},
            )
        if self.held:
            self.execute(f"UNWIND $keys AS k CREATE (:{LINKS_TABLE} {{key: k}})", {"keys": list(self.held)})
        self.held = {}
