"""The claims model's part of the web view, backend-neutral: node ids, what a `ViewRequest` lets through,
and `ViewNode`/`ViewEdge` from rows. Both stores read rows of the same shape (the aliases below) and
leave choosing and assembling to this module, so they draw the same graph.

Rows: a node row has `key`, the citation (`session`, `seq`, `hash`) and, per label, the columns of
`ladybug_reads.CLAIM` / `OBSERVATION` (plus `placeholder`) or, for an entity, `name`, `first_seen`,
`sessions`; an edge row has `rel` (the relationship type: a system one, or `RELATES` with its
`relation`), `at`, `derived`, `via`, `trust`, `method`, `edge_id` and the citation.

What a request lets through (`Visibility`):
- `sessions`: an observation or a claim written by one of them; an entity one of them mentioned or
  related; an edge written by one of them.
- `as_of` (RFC 3339, any offset; `canonical_as_of` puts it in the stored form first, so times compare as
  text): what was written at or before it (an observation's `recorded_at`, a claim's `asserted_at`, an
  entity's `first_seen`, an edge's `at`), and no claim superseded at or before it (so every claim shown
  as of a time is shown as it then was: not superseded, accepted only if accepted by then).
- never a placeholder: it has nothing to show until it is projected.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from eventloom.event import citation
from gateway.packs.claims.model import NODE_LABELS, NodeLabel
from gateway.packs.claims.reads import InvalidQuestion
from readmodels.graph.model import as_canonical
from readmodels.view import ViewEdge, ViewNode, ViewRequest

Row = dict[str, Any]
PREFIX: Final = "claims"
SYSTEM: Final = frozenset({"SUBJECT", "BASIS", "SUPERSEDES", "CONTRADICTS", "ACCEPTS"})
Kind = Literal["entity", "observation", "claim", "resolution"]
LABEL_ORDER: Final[dict[NodeLabel, int]] = {"Claim": 0, "Observation": 1, "KnownEntity": 2}
"""Between nodes written at the same time (an observation and the entities it mentions), which first."""


def node_id(label: NodeLabel, key: str) -> str:
    return f"{PREFIX}:{label}:{key}"


def parse_node_id(text: str) -> tuple[NodeLabel, str] | None:
    """(label, key) of one of this model's node ids (`claims:<Label>:<key>`), else None."""
    prefix, _, rest = text.partition(":")
    label, _, key = rest.partition(":")
    for known in NODE_LABELS:
        if prefix == PREFIX and label == known and key:
            return known, key
    return None


def cited(row: Row) -> str | None:
    if row.get("session") is None or row.get("seq") is None or row.get("hash") is None:
        return None
    return citation(str(row["session"]), int(row["seq"]), str(row["hash"]))


def canonical_as_of(request: ViewRequest) -> ViewRequest:
    """`request` with `as_of` in the one form stored times have (UTC, six fractional digits, `Z`): compared
    as text as given, "10:00:01Z" would sort after a stored "10:00:01.500000Z" ('Z' > '.'). Refused
    (`InvalidQuestion` naming `as_of`) when it is not an RFC 3339 time."""
    if request.as_of is None:
        return request
    try:
        as_of = as_canonical(request.as_of)
    except (ValueError, OverflowError):
        raise InvalidQuestion(f"as_of: {request.as_of[:64]!r} is not an RFC 3339 time") from None
    return msgspec.structs.replace(request, as_of=as_of)


def written_at(label: NodeLabel, row: Row) -> str:
    """When the event that wrote the node happened (what `as_of` and the newest-first order compare)."""
    column = {"Observation": "recorded_at", "Claim": "asserted_at", "KnownEntity": "first_seen"}[label]
    return str(row.get(column) or "")


class Visibility:
    """What `request` lets through."""

    def __init__(self, request: ViewRequest) -> None:
        self.sessions = None if request.sessions is None else frozenset(request.sessions)
        self.as_of = request.as_of

    def node(self, label: NodeLabel, row: Row | None) -> bool:
        if row is None or row.get("placeholder"):
            return False
        if self.as_of is not None and written_at(label, row) > self.as_of:
            return False
        if label == "KnownEntity":
            return self.sessions is None or not self.sessions.isdisjoint(row.get("sessions") or [])
        if self.sessions is not None and row.get("session") not in self.sessions:
            return False
        superseded_at = row.get("superseded_at")
        return not (self.as_of is not None and superseded_at is not None and superseded_at <= self.as_of)

    def edge(self, row: Row) -> bool:
        if self.sessions is not None and row.get("session") not in self.sessions:
            return False
        return self.as_of is None or str(row.get("at") or "") <= self.as_of


def view_node(label: NodeLabel, row: Row, as_of: str | None) -> ViewNode:
    """The node of a visible row, as it was at `as_of` (None: as it is)."""
    citations = [c for c in (cited(row),) if c is not None]
    key = str(row["key"])
    if label == "KnownEntity":
        properties: dict[str, Any] = {"key": key, "sessions": list(row.get("sessions") or [])}
        return ViewNode(
            id=node_id(label, key),
            kind="entity",
            label=str(row["name"]),
            session=row.get("session"),
            properties=properties,
            citations=citations,
        )
    if label == "Observation":
        properties = {
            name: row[name]
            for name in ("content", "source", "observed_at", "recorded_at", "extracted_by", "mentions")
        }
        return ViewNode(
            id=node_id(label, key),
            kind="observation",
            label=str(row["label"]),
            session=row.get("session"),
            valid_from=row["observed_at"],
            properties=properties,
            citations=citations,
        )
    return _claim_node(row, as_of, citations)


def _claim_node(row: Row, as_of: str | None, citations: list[str]) -> ViewNode:
    """A claim or a Resolution: superseded (and ending) only when drawn as it is now; with `as_of`, only
    what was superseded after it is drawn, as it then was."""
    superseded = row.get("superseded_by") is not None and as_of is None
    accepted = bool(row.get("accepted")) and (as_of is None or str(row.get("accepted_at") or "") <= as_of)
    properties = {
        name: row[name]
        for name in ("subject", "predicate", "object", "confidence", "source_agent", "negated", "basis")
    }
    properties |= {"accepted": accepted, "supersedes": list(row.get("supersedes") or [])}
    if row.get("statement") is not None:
        properties["statement"] = row["statement"]
    if superseded:
        properties["superseded_by"] = row["superseded_by"]
    kind: Kind = "resolution" if row.get("kind") == "resolution" else "claim"
    return ViewNode(
        id=node_id("Claim", str(row["key"])),
        kind=kind,
        label=str(row["label"]),
        session=row.get("session"),
        valid_from=row["asserted_at"],
        valid_to=row.get("superseded_at") if superseded else None,
        superseded=superseded,
        properties=properties,
        citations=citations,
    )


def view_edge(source: str, target: str, row: Row) -> ViewEdge:
    """An edge from node id `source` to `target`: a system one, or a relation (`RELATES`)."""
    rel = str(row["rel"])
    system = rel in SYSTEM
    return ViewEdge(
        source=source,
        target=target,
        type=rel if system else str(row["relation"]),
        system=system,
        derived=bool(row.get("derived")) and not system,
        trust=float(row["trust"]) if rel == "CONTRADICTS" and row.get("trust") is not None else None,
        valid_from=row.get("at"),
        citation=cited(row),
    )
