"""What a batch of claims operations writes on Neo4j, worked out in Python: the rows of each statement.

A batch is written as a fixed handful of `UNWIND` statements (`neo4j_writes`), whatever the mix of its
operations, instead of a few statements per run of operations of one kind: a batch of observations and
claims in turn would otherwise cost thousands of round trips. That is safe because the operations commute
on what they write, but for what `plan` settles here, in the operations' order, from the claims' stored
state (read under their write locks, so it cannot change before the transaction ends):

- which acceptance of a claim stands (the first: a Resolution's own, or the first `AcceptClaim`), and so
  which claims materialise their derived edge, and when;
- the entities touched, in order: a new entity keeps the first name given, as one by one it would.

Relations are checked here too (`check_operations`), before any statement runs: they go into Cypher text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from eventloom.event import citation
from gateway.packs.claims.events import PREDICATE, RESERVED_PREDICATES
from gateway.packs.claims.model import (
    AcceptClaim,
    Cite,
    EntityName,
    Operation,
    RecordClaim,
    RecordContradiction,
    RecordObservation,
    RelateEntities,
    claim_label,
    observation_label,
)
from readmodels.graph.cypher.io import Row

_RELATION: Final = re.compile(PREDICATE)


class InvalidOperation(ValueError):
    """An operation the store refuses before writing anything; the message names the field."""


def checked_relation(relation: object, field: str) -> str:
    """`relation` if it may be a relationship type: UPPER_SNAKE (`events.PREDICATE`), not the pack's own."""
    if not isinstance(relation, str) or not _RELATION.fullmatch(relation):
        raise InvalidOperation(f"{field}: {relation!r} is not a relation in UPPER_SNAKE_CASE")
    if relation in RESERVED_PREDICATES:
        raise InvalidOperation(f"{field}: {relation} is one of the pack's own relationship types")
    return relation


def check_operations(operations: Iterable[Operation]) -> None:
    """Refuse, before anything is written, what the Cypher text of an operation could not safely hold."""
    for op in operations:
        if isinstance(op, RelateEntities):
            checked_relation(op.relation, "relation")
        elif isinstance(op, RecordClaim):
            checked_relation(op.predicate, "predicate")
            if op.key in op.basis or op.key in op.supersedes:
                raise InvalidOperation(f"basis: claim {op.key} cannot rest on or settle itself")
        elif isinstance(op, RecordContradiction) and op.first == op.second:
            raise InvalidOperation(f"second: claim {op.first} cannot contradict itself")


def source(session: str, seq: int, event_hash: str) -> dict[str, Any]:
    """What every node written from an event carries: the event it comes from."""
    return {
        "session": session,
        "seq": seq,
        "hash": event_hash,
        "citation": citation(session, seq, event_hash),
    }


def cited(cite: Cite) -> dict[str, Any]:
    """What every relationship carries: the event that wrote it, and when."""
    return {**source(cite.session, cite.seq, cite.hash), "at": cite.ts}


def _given(properties: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in properties.items() if value is not None}


class Recorded(msgspec.Struct, frozen=True, gc=False):
    """What a recorded claim's derived edge is made of."""

    subject: EntityName
    predicate: str
    object: EntityName
    negated: bool
    session: str
    seq: int
    hash: str


class ClaimState(msgspec.Struct, gc=False):
    """A claim as stored (or as the batch has made it so far): recorded or not, accepted when."""

    recorded: Recorded | None = None
    accepted_at: str | None = None


def claim_state(props: Row | None) -> ClaimState:
    """The state of a stored claim node's properties (None: not stored)."""
    if props is None:
        return ClaimState()
    recorded = None
    if props.get("placeholder") is False:
        recorded = Recorded(
            subject=EntityName(str(props["subjectKey"]), str(props["subject"])),
            predicate=str(props["predicate"]),
            object=EntityName(str(props["objectKey"]), str(props["object"])),
            negated=bool(props.get("negated")),
            session=str(props["session"]),
            seq=int(props["seq"]),
            hash=str(props["hash"]),
        )
    accepted_at = props.get("acceptedAt") if props.get("accepted") else None
    return ClaimState(recorded, None if accepted_at is None else str(accepted_at))


def claims_to_lock(operations: Sequence[Operation]) -> list[str]:
    """The claims whose state `plan` reads: recorded or accepted by the batch (sorted: the lock order)."""
    keys = {op.key for op in operations if isinstance(op, RecordClaim)}
    keys |= {op.claim for op in operations if isinstance(op, AcceptClaim)}
    return sorted(keys)


class Touch(msgspec.Struct, frozen=True, gc=False):
    """An entity seen by an event at `at`."""

    entity: EntityName
    at: str
    session: str
    seq: int
    hash: str


class WritePlan(msgspec.Struct, gc=False):
    """The rows of each statement of `neo4j_writes`, each list in the operations' order."""

    entities: list[Row] = msgspec.field(default_factory=list)
    observations: list[Row] = msgspec.field(default_factory=list)
    claims: list[Row] = msgspec.field(default_factory=list)
    supersedes: list[Row] = msgspec.field(default_factory=list)
    accepts: list[Row] = msgspec.field(default_factory=list)
    contradictions: list[Row] = msgspec.field(default_factory=list)
    settle: list[str] = msgspec.field(default_factory=list)
    basis: list[Row] = msgspec.field(default_factory=list)
    relations: dict[str, list[Row]] = msgspec.field(default_factory=dict)


class _Planner:
    def __init__(self, states: dict[str, ClaimState]) -> None:
        self.states = states
        self.plan = WritePlan()
        self.touches: list[Touch] = []
        self.pairs: dict[frozenset[str], Row] = {}

    def touch(self, entities: Iterable[EntityName], cite: Cite, at: str | None = None) -> None:
        self.touches += [Touch(e, at or cite.ts, cite.session, cite.seq, cite.hash) for e in entities]

    def relate(self, source_: EntityName, relation: str, target: EntityName, via: str, props: Row) -> None:
        row = {"source": source_.key, "target": target.key, "via": via, "props": props}
        self.plan.relations.setdefault(checked_relation(relation, "relation"), []).append(row)

    def materialise(self, key: str, claim: Recorded, at: str) -> None:
        """The derived edge of accepted claim `key`: cited to the claim, from the time it was accepted."""
        cite = Cite(claim.session, claim.seq, claim.hash, at)
        self.touch([claim.subject, claim.object], cite)
        self.relate(claim.subject, claim.predicate, claim.object, key, {"derived": True, **cited(cite)})

    def observation(self, op: RecordObservation) -> None:
        self.touch(op.mentions, op.cite)
        props = {
            "content": op.content,
            "label": observation_label(op.content),
            "source": op.source,
            "observedAt": op.observed_at,
            "recordedAt": op.cite.ts,
            "extractedBy": op.extracted_by,
            "mentions": [m.name for m in op.mentions],
            **source(op.cite.session, op.cite.seq, op.cite.hash),
        }
        self.plan.observations.append(
            {"key": op.key, "props": props, "mentions": [m.key for m in op.mentions], "rel": cited(op.cite)}
        )

    def claim(self, op: RecordClaim) -> None:
        self.touch([op.subject], op.cite)
        state = self.states.setdefault(op.key, ClaimState())
        state.recorded = Recorded(
            op.subject, op.predicate, op.object, op.negated, op.cite.session, op.cite.seq, op.cite.hash
        )
        acceptance = None
        if op.kind == "resolution" and state.accepted_at is None:  # accepted by itself
            state.accepted_at = op.asserted_at
            acceptance = {"accepted": True, "acceptedBy": op.source_agent, "acceptedAt": op.asserted_at}
        props = {
            "kind": op.kind,
            "label": claim_label(op.subject.name, op.predicate, op.object.name, op.negated),
            "subject": op.subject.name,
            "subjectKey": op.subject.key,
            "predicate": op.predicate,
            "object": op.object.name,
            "objectKey": op.object.key,
            "confidence": op.confidence,
            "sourceAgent": op.source_agent,
            "negated": op.negated,
            "statement": op.statement,
            "assertedAt": op.asserted_at,
            "basis": list(op.basis),
            "supersedes": list(op.supersedes),
            **source(op.cite.session, op.cite.seq, op.cite.hash),
        }
        self.plan.claims.append(
            {
                "key": op.key,
                "props": _given(props),
                "resolution": op.kind == "resolution",
                "acceptance": acceptance,
                "subject": op.subject.key,
                "rel": cited(op.cite),
            }
        )
        rel = cited(op.cite)
        self.plan.supersedes += [
            {"claim": op.key, "target": key, "at": op.asserted_at, "rel": rel} for key in op.supersedes
        ]
        self.plan.basis += [{"claim": op.key, "basis": key, "rel": rel} for key in op.basis]
        self.plan.settle += [op.key, *op.supersedes, *op.basis]
        if state.accepted_at is not None and not op.negated:
            self.materialise(op.key, state.recorded, state.accepted_at)

    def accept(self, op: AcceptClaim) -> None:
        """The first acceptance stands: accepting again changes nothing."""
        state = self.states.setdefault(op.claim, ClaimState())
        self.plan.settle.append(op.claim)
        if state.accepted_at is not None:
            return
        state.accepted_at = op.cite.ts
        acceptance = {"accepted": True, "acceptedBy": op.reviewer, "acceptedAt": op.cite.ts}
        self.plan.accepts.append({"claim": op.claim, "acceptance": acceptance})
        if state.recorded is not None and not state.recorded.negated:
            self.materialise(op.claim, state.recorded, op.cite.ts)

    def relation(self, op: RelateEntities) -> None:
        self.touch([op.source, op.target], op.cite)
        self.relate(op.source, op.relation, op.target, op.via, {"derived": op.derived, **cited(op.cite)})

    def contradiction(self, op: RecordContradiction) -> None:
        """One per pair whatever the direction: the first inferred stands."""
        props = {"trust": op.trust, "method": op.method, "edgeId": op.edge_id, **cited(op.cite)}
        self.pairs.setdefault(
            frozenset((op.first, op.second)), {"first": op.first, "second": op.second, "props": props}
        )
        self.plan.settle += [op.first, op.second]

    def entities(self) -> list[Row]:
        """One row per entity, in key order (two writers lock them in one order): the first name given,
        the sessions that saw it in order, and the earliest sighting."""
        rows: dict[str, Row] = {}
        for touch in self.touches:
            row = rows.setdefault(
                touch.entity.key,
                {"key": touch.entity.key, "name": touch.entity.name, "sessions": [], "at": None},
            )
            if touch.session not in row["sessions"]:
                row["sessions"].append(touch.session)
            if row["at"] is None or touch.at < row["at"]:
                row["at"], row["source"] = touch.at, source(touch.session, touch.seq, touch.hash)
        return [rows[key] for key in sorted(rows)]


def plan(operations: Sequence[Operation], states: dict[str, ClaimState]) -> WritePlan:
    """The rows `operations` (checked, in order) write, given the stored `states` of `claims_to_lock`."""
    planner = _Planner(states)
    for op in operations:
        if isinstance(op, RecordObservation):
            planner.observation(op)
        elif isinstance(op, RecordClaim):
            planner.claim(op)
        elif isinstance(op, AcceptClaim):
            planner.accept(op)
        elif isinstance(op, RelateEntities):
            planner.relation(op)
        else:
            planner.contradiction(op)
    written = planner.plan
    written.entities = planner.entities()
    written.contradictions = list(planner.pairs.values())
    written.settle = list(dict.fromkeys(written.settle))
    return written
