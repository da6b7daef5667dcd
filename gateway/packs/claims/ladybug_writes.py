"""Applying the claims model's operations to LadybugDB, each as its docstring in `model` says.

Operation by operation, in order, inside the caller's transaction, each seeing what the ones before it
wrote; but what they write is held and written at the end of the batch, a statement per kind of row rather
than one per node or relationship (`ladybug_nodes`, then `ladybug_links`). Each node is found by its
primary key, created when absent (`CREATE`, not `MERGE`: batched, it drops rows and costs tens of
milliseconds), and each relationship is kept once through its key in `LINKS_TABLE` (`link_key`), so an
operation applied twice writes nothing new. Labels and relationship types come only from the closed sets
of `ladybug_schema`; every value is a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

import msgspec

from gateway.packs.claims.events import PREDICATE, RESERVED_PREDICATES
from gateway.packs.claims.ladybug_links import HeldLink, HeldLinks
from gateway.packs.claims.ladybug_nodes import HeldNodes
from gateway.packs.claims.ladybug_schema import LINKS_TABLE, PAIRS, REL_COLUMNS
from gateway.packs.claims.model import (
    AcceptClaim,
    Cite,
    EntityName,
    NodeLabel,
    Operation,
    RecordClaim,
    RecordContradiction,
    RecordObservation,
    RelateEntities,
    claim_label,
    observation_label,
)
from readmodels.graph.cypher.io import Execute, Row

_CLAIM_READ: Final = (
    "placeholder",
    "subject",
    "subjectKey",
    "predicate",
    "object",
    "objectKey",
    "negated",
    "accepted",
    "acceptedAt",
    "session",
    "seq",
    "hash",
)


_PREDICATE: Final = re.compile(PREDICATE)


class ClaimsWriteError(ValueError):
    """An operation this store cannot write as given; the message names the field."""


def cited(cite: Cite) -> dict[str, Any]:
    return {"session": cite.session, "seq": cite.seq, "hash": cite.hash}


def checked_predicate(field: str, predicate: str) -> str:
    """`predicate` if it is a relation a triple or a claim may have (`events.PREDICATE`, not reserved)."""
    if not _PREDICATE.fullmatch(predicate) or predicate in RESERVED_PREDICATES:
        raise ClaimsWriteError(f"{field}: {predicate!r} is not an UPPER_SNAKE relation of the claims model")
    return predicate


def link_key(rel: str, source: str, target: str, *more: str) -> str:
    """What identifies a relationship: its type, its ends' keys and (`RELATES`) its relation and `via`."""
    return "\x1f".join((rel, source, target, *more))


class _Seen(msgspec.Struct, gc=False):
    """What the writer knows of an entity it has touched: the sessions that saw it, its first sighting."""

    sessions: list[str]
    first_seen: str | None


class ClaimsWriter:
    """Writes operations through `execute`, remembering the entities it saw (sessions, first sighting)."""

    def __init__(self, execute: Execute) -> None:
        self.execute = execute
        self.entities: dict[str, _Seen] = {}
        self.nodes = HeldNodes(execute)
        self.links = HeldLinks(execute)

    def write(self, operations: Sequence[Operation]) -> None:
        """Apply `operations` in order; the nodes and relationships they write are written at the end
        (`HeldNodes`, then `HeldLinks`)."""
        for op in operations:
            if isinstance(op, RecordObservation):
                self.record_observation(op)
            elif isinstance(op, RecordClaim):
                self.record_claim(op)
            elif isinstance(op, AcceptClaim):
                self.accept_claim(op)
            elif isinstance(op, RelateEntities):
                self.relate(op)
            else:
                self.record_contradiction(op)
        self.nodes.write()
        self.links.write()

    # -- nodes -------------------------------------------------------------------------------------------

    def node(self, label: NodeLabel, key: str, names: Sequence[str] = ("key",)) -> Row | None:
        """Columns `names` of node `key` as the operations so far have made it (None: no such node)."""
        return self.nodes.get(label, key, names)

    def set_node(self, label: NodeLabel, key: str, values: Row, *, create: bool) -> None:
        """Create node `key` with `values` (`create`), or set them on the existing one (None clears)."""
        if create:
            self.nodes.create(label, key, values)
        else:
            self.nodes.set(label, key, values)

    def placeholder(self, label: NodeLabel, key: str) -> None:
        """Node `key` of `label`: as it is, or a placeholder with only its key."""
        if self.node(label, key) is None:
            self.set_node(label, key, {"placeholder": True}, create=True)

    def entity(self, entity: EntityName, cite: Cite) -> None:
        """Entity `entity.key` (created with its name if absent), seen by `cite`'s session at `cite.ts`. It
        keeps its earliest sighting by event time (`firstSeen` and that event's citation; of two at one
        time, the one applied first), as on Neo4j: sessions applied out of time order end the same."""
        seen = self.entities.get(entity.key)
        if seen is None:
            found = self.node("KnownEntity", entity.key, ("sessions", "firstSeen"))
            if found is None:
                values = {"name": entity.name, "firstSeen": cite.ts, "sessions": [cite.session]}
                self.set_node("KnownEntity", entity.key, {**values, **cited(cite)}, create=True)
                self.entities[entity.key] = _Seen(sessions=[cite.session], first_seen=cite.ts)
                return
            seen = _Seen(sessions=list(found["sessions"] or []), first_seen=found["firstSeen"])
            self.entities[entity.key] = seen
        changes: Row = {}
        if cite.session not in seen.sessions:
            seen.sessions.append(cite.session)
            changes["sessions"] = list(seen.sessions)
        if seen.first_seen is None or cite.ts < seen.first_seen:
            seen.first_seen = cite.ts
            changes |= {"firstSeen": cite.ts, **cited(cite)}
        if changes:
            self.set_node("KnownEntity", entity.key, changes, create=False)

    # -- relationships -----------------------------------------------------------------------------------

    def link(
        self, rel: str, source: tuple[NodeLabel, str], target: tuple[NodeLabel, str], key: str, values: Row
    ) -> bool:
        """Relationship `rel` from `source` to `target` (label, key) unless the one keyed `key` exists;
        whether it was created."""
        if (source[0], target[0]) not in PAIRS[rel]:
            raise ClaimsWriteError(f"{rel}: no relationship from {source[0]} to {target[0]}")
        if self.links.exists(key):
            return False
        given = {name: value for name, value in values.items() if value is not None}
        unknown = set(given).difference(REL_COLUMNS)
        if unknown:
            raise ClaimsWriteError(f"{rel}: no such relationship property {sorted(unknown)}")
        self.links.hold(key, HeldLink(rel, source, target, given))
        return True

    def relate(self, op: RelateEntities) -> None:
        checked_predicate("RelateEntities.relation", op.relation)
        self.entity(op.source, op.cite)
        self.entity(op.target, op.cite)
        self._relate(op.source.key, op.relation, op.target.key, op.derived, op.via, op.cite, op.cite.ts)

    def _relate(
        self, source: str, relation: str, target: str, derived: bool, via: str, cite: Cite, at: str
    ) -> None:
        values = {"at": at, "relation": relation, "derived": derived, "via": via, **cited(cite)}
        key = link_key("RELATES", source, target, relation, via)
        self.link("RELATES", ("KnownEntity", source), ("KnownEntity", target), key, values)

    # -- operations --------------------------------------------------------------------------------------

    def record_observation(self, op: RecordObservation) -> None:
        found = self.node("Observation", op.key)
        values = {
            "placeholder": False,
            "content": op.content,
            "label": observation_label(op.content),
            "source": op.source,
            "observedAt": op.observed_at,
            "recordedAt": op.cite.ts,
            "extractedBy": op.extracted_by,
            "mentions": [entity.name for entity in op.mentions],
            **cited(op.cite),
        }
        self.set_node("Observation", op.key, values, create=found is None)
        for entity in op.mentions:
            self.entity(entity, op.cite)
            edge = {"at": op.cite.ts, **cited(op.cite)}
            key = link_key("SUBJECT", op.key, entity.key)
            self.link("SUBJECT", ("Observation", op.key), ("KnownEntity", entity.key), key, edge)

    def record_claim(self, op: RecordClaim) -> None:
        checked_predicate("RecordClaim.predicate", op.predicate)
        if op.key in op.basis or op.key in op.supersedes:
            raise ClaimsWriteError(f"RecordClaim.basis: claim {op.key!r} cannot rest on or settle itself")
        found = self.node("Claim", op.key, _CLAIM_READ)
        resolution = op.kind == "resolution"
        values: Row = {
            "placeholder": False,
            "kind": op.kind,
            "label": claim_label(op.subject.name, op.predicate, op.object.name, op.negated),
            "subject": op.subject.name,
            "subjectKey": op.subject.key,
            "predicate": op.predicate,
            "object": op.object.name,
            "objectKey": op.object.key,
            "confidence": float(op.confidence),
            "sourceAgent": op.source_agent,
            "negated": op.negated,
            "statement": op.statement,
            "assertedAt": op.asserted_at,
            "basis": op.basis,
            "supersedes": op.supersedes,
            **cited(op.cite),
        }
        accepted_before = found is not None and bool(found["accepted"])  # the first acceptance stands
        if resolution and not accepted_before:  # accepted by itself
            values |= {"accepted": True, "acceptedBy": op.source_agent, "acceptedAt": op.asserted_at}
        self.set_node("Claim", op.key, values, create=found is None)
        self._adopt_basis_placeholder(op.key)
        self.entity(op.subject, op.cite)
        edge = {"at": op.cite.ts, **cited(op.cite)}
        self.link(
            "SUBJECT",
            ("Claim", op.key),
            ("KnownEntity", op.subject.key),
            link_key("SUBJECT", op.key, op.subject.key),
            edge,
        )
        for basis in op.basis:
            self._basis(op.key, basis, edge)
        for settled in op.supersedes:
            self.placeholder("Claim", settled)
            marks = {"supersededBy": op.key, "supersededAt": op.asserted_at}
            self.set_node("Claim", settled, marks, create=False)
            key = link_key("SUPERSEDES", op.key, settled)
            self.link("SUPERSEDES", ("Claim", op.key), ("Claim", settled), key, edge)
        accepted_at = str((found or {})["acceptedAt"]) if accepted_before else op.asserted_at
        if (resolution or accepted_before) and not op.negated:
            self._materialise(op.key, op.subject, op.predicate, op.object, op.cite, accepted_at)

    def _basis(self, claim: str, basis: str, edge: Row) -> None:
        """`BASIS` to the claim or observation `basis`, or to a placeholder observation."""
        label: NodeLabel = "Claim" if self.node("Claim", basis) is not None else "Observation"
        if label == "Observation":
            self.placeholder("Observation", basis)
        self.link("BASIS", ("Claim", claim), (label, basis), link_key("BASIS", claim, basis), edge)

    def _adopt_basis_placeholder(self, key: str) -> None:
        """A placeholder observation `key` (a basis named before it was projected) turns out to be this
        claim: its `BASIS` links move here, and it goes."""
        found = self.node("Observation", key, ("placeholder",))
        if found is None or not found["placeholder"]:
            return
        rows = self.execute(
            "MATCH (o:Observation {key: $key})<-[r:BASIS]-(c:Claim) "
            "RETURN c.key AS claim, r.at AS at, r.session AS session, r.seq AS seq, r.hash AS hash",
            {"key": key},
        )
        self.nodes.delete("Observation", key)
        self.links.retarget("BASIS", ("Observation", key), ("Claim", key))
        for row in rows:
            claim = str(row["claim"])
            values = {name: row[name] for name in ("at", "session", "seq", "hash")}
            self.execute(
                f"MATCH (l:{LINKS_TABLE} {{key: $key}}) DELETE l", {"key": link_key("BASIS", claim, key)}
            )
            self.link("BASIS", ("Claim", claim), ("Claim", key), link_key("BASIS", claim, key), values)

    def _materialise(
        self, claim: str, subject: EntityName, predicate: str, obj: EntityName, cite: Cite, at: str
    ) -> None:
        """An accepted claim's derived edge, cited to the claim (`cite`), from the time it was accepted
        (`at`): when its entities are seen by it."""
        accepted = Cite(cite.session, cite.seq, cite.hash, at)
        self.entity(subject, accepted)
        self.entity(obj, accepted)
        self._relate(subject.key, predicate, obj.key, True, claim, cite, at)

    def accept_claim(self, op: AcceptClaim) -> None:
        found = self.node("Claim", op.claim, _CLAIM_READ)
        if found is None:
            self.set_node("Claim", op.claim, {"placeholder": True}, create=True)
        elif found["accepted"]:
            return  # accepted once: the first acceptance stands
        marks = {"accepted": True, "acceptedBy": op.reviewer, "acceptedAt": op.cite.ts}
        self.set_node("Claim", op.claim, marks, create=False)
        if found is None or found["placeholder"] or found["negated"]:
            return
        claim_cite = Cite(str(found["session"]), int(found["seq"]), str(found["hash"]), op.cite.ts)
        subject = EntityName(str(found["subjectKey"]), str(found["subject"]))
        obj = EntityName(str(found["objectKey"]), str(found["object"]))
        self._materialise(op.claim, subject, str(found["predicate"]), obj, claim_cite, op.cite.ts)

    def record_contradiction(self, op: RecordContradiction) -> None:
        if op.first == op.second:
            raise ClaimsWriteError(f"RecordContradiction.second: claim {op.first!r} cannot contradict itself")
        self.placeholder("Claim", op.first)
        self.placeholder("Claim", op.second)
        values = {"at": op.cite.ts, "trust": float(op.trust), "method": op.method, "edgeId": op.edge_id}
        key = link_key("CONTRADICTS", *sorted((op.first, op.second)))
        self.link("CONTRADICTS", ("Claim", op.first), ("Claim", op.second), key, {**values, **cited(op.cite)})
