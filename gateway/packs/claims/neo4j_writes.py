"""Writing the claims model's operations to Neo4j, in order, inside the caller's transaction.

Each run of consecutive operations of one kind is written by a few `UNWIND $rows AS r ...` statements (in
chunks); the runs follow one another in the operations' order. Labels and the pack's own relationship
types in the Cypher text come from closed sets; a triple's relation is the relationship type itself, so
every relation is checked (`check_operations`: `events.PREDICATE`, not one of `events.RESERVED_PREDICATES`)
before any statement runs, and is checked again when read back from a claim. Every value is a parameter.

Placeholders. A link to a node not projected yet creates it with only its key and `placeholder: true`;
recording the node fills it in (`placeholder: false`). The target of `SUPERSEDES`, `CONTRADICTS` or an
acceptance is a claim, so its placeholder is a `Claim`; a basis may be an observation or a claim, so an
unknown one is an `Observation` placeholder, folded into the `Claim` (its `BASIS` links moved) when that
key turns out to be a claim. Whoever links to a basis or records a claim first `MERGE`s the `Observation`
of that key, which takes the lock of its unique key until the transaction ends: of two writers, the second
sees what the first committed, so a key never ends up both a claim and a placeholder observation.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec
from neo4j import AsyncManagedTransaction

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
from readmodels.neo4j.driver import fetch

ROWS_PER_STATEMENT: Final = 5_000
LOCK: Final = "claimsLock"
"""A property set and removed at once: how Cypher takes a node's write lock (nothing of it is stored)."""
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


async def _run(tx: AsyncManagedTransaction, statement: str, rows: Sequence[Any]) -> None:
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        result = await tx.run(
            f"UNWIND $rows AS r {statement}", {"rows": list(rows[start : start + ROWS_PER_STATEMENT])}
        )
        await result.consume()


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


_ENTITIES: Final = (
    "MERGE (e:KnownEntity {key: r.key}) ON CREATE SET e.name = r.name "
    f"SET e.{LOCK} = true REMOVE e.{LOCK} "
    "WITH e, r SET e.sessions = coalesce(e.sessions, []) + "
    "[s IN r.sessions WHERE NOT s IN coalesce(e.sessions, [])] "
    "WITH e, r WHERE e.firstSeen IS NULL OR r.at < e.firstSeen "
    "SET e.firstSeen = r.at, e += r.source"
)
"""Each entity (created with the first name it is given) write-locked, then the sessions that saw it
added, and the earliest event that did kept (`firstSeen`, its citation): whatever order writers run in."""


class Touch(msgspec.Struct, frozen=True, gc=False):
    """An entity seen by an event (`at` its time): what `_ENTITIES` records of it."""

    entity: EntityName
    at: str
    session: str
    seq: int
    hash: str


def _touches(entities: Iterable[EntityName], cite: Cite) -> list[Touch]:
    return [Touch(entity, cite.ts, cite.session, cite.seq, cite.hash) for entity in entities]


async def _touch(tx: AsyncManagedTransaction, touches: Iterable[Touch]) -> None:
    """Create or update the entities `touches` name, in key order (two writers lock them in one order)."""
    rows: dict[str, Row] = {}
    for touch in touches:
        row = rows.setdefault(
            touch.entity.key, {"key": touch.entity.key, "name": touch.entity.name, "sessions": [], "at": None}
        )
        if touch.session not in row["sessions"]:
            row["sessions"].append(touch.session)
        if row["at"] is None or touch.at < row["at"]:
            row["at"], row["source"] = touch.at, source(touch.session, touch.seq, touch.hash)
    await _run(tx, _ENTITIES, [rows[key] for key in sorted(rows)])


def _given(properties: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in properties.items() if value is not None}


_OBSERVATIONS: Final = (
    "MERGE (o:Observation {key: r.key}) SET o += r.props, o.placeholder = false "
    "WITH o, r UNWIND r.mentions AS m MATCH (e:KnownEntity {key: m}) "
    "MERGE (o)-[s:SUBJECT]->(e) SET s += r.rel"
)


async def _observations(tx: AsyncManagedTransaction, ops: Sequence[RecordObservation]) -> None:
    await _touch(tx, [touch for op in ops for touch in _touches(op.mentions, op.cite)])
    rows: list[Row] = [
        {
            "key": op.key,
            "props": {
                "content": op.content,
                "label": observation_label(op.content),
                "source": op.source,
                "observedAt": op.observed_at,
                "recordedAt": op.cite.ts,
                "extractedBy": op.extracted_by,
                "mentions": [m.name for m in op.mentions],
                **source(op.cite.session, op.cite.seq, op.cite.hash),
            },
            "mentions": [m.key for m in op.mentions],
            "rel": cited(op.cite),
        }
        for op in ops
    ]
    await _run(tx, _OBSERVATIONS, rows)


_CLAIMS: Final = (
    "MERGE (c:Claim {key: r.key}) SET c += r.props, c.placeholder = false "
    "SET c += CASE WHEN r.acceptance IS NOT NULL AND c.acceptedBy IS NULL THEN r.acceptance ELSE {} END "
    "FOREACH (_ IN CASE WHEN r.resolution THEN [1] ELSE [] END | SET c:Resolution) "
    "WITH c, r MATCH (e:KnownEntity {key: r.subject}) MERGE (c)-[s:SUBJECT]->(e) SET s += r.rel"
)
_SETTLE: Final = (  # r: a key that may be a basis or is a claim
    "MERGE (o:Observation {key: r}) ON CREATE SET o.placeholder = true "
    "WITH o, r OPTIONAL MATCH (t:Claim {key: r}) "
    "WITH o, t WHERE t IS NOT NULL AND o.content IS NULL "
    "CALL (o, t) { MATCH (x)-[b:BASIS]->(o) MERGE (x)-[n:BASIS]->(t) SET n += properties(b) } "
    "DETACH DELETE o"
)
"""Lock each key's `Observation` (a placeholder if new); if the key is a claim (recorded or a placeholder),
fold that observation placeholder into it. Run for every key a claim writes or links to."""
_BASIS: Final = (
    "MATCH (c:Claim {key: r.claim}) "
    "OPTIONAL MATCH (t:Claim {key: r.basis}) OPTIONAL MATCH (o:Observation {key: r.basis}) "
    "WITH c, r, coalesce(t, o) AS target "
    "MERGE (c)-[b:BASIS]->(target) SET b += r.rel"
)
_SUPERSEDES: Final = (
    "MATCH (c:Claim {key: r.claim}) "
    "MERGE (s:Claim {key: r.target}) ON CREATE SET s.placeholder = true "
    "SET s.supersededBy = r.claim, s.supersededAt = r.at "
    "MERGE (c)-[e:SUPERSEDES]->(s) SET e += r.rel"
)


def _acceptance(by: str, at: str) -> dict[str, Any]:
    """The mark of an accepted claim; its derived edge holds from `at`."""
    return {"accepted": True, "acceptedBy": by, "acceptedAt": at}


def _claim_row(op: RecordClaim) -> Row:
    resolution = op.kind == "resolution"
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
    return {
        "key": op.key,
        "props": _given(props),
        "resolution": resolution,
        "acceptance": _acceptance(op.source_agent, op.asserted_at) if resolution else None,
        "subject": op.subject.key,
        "rel": cited(op.cite),
    }


async def _claims(tx: AsyncManagedTransaction, ops: Sequence[RecordClaim]) -> None:
    """The claims and the claims they settle, then their bases: by then, every claim among them is one."""
    await _touch(tx, [touch for op in ops for touch in _touches([op.subject], op.cite)])
    await _run(tx, _CLAIMS, [_claim_row(op) for op in ops])
    supersedes: list[Row] = [
        {"claim": op.key, "target": key, "at": op.asserted_at, "rel": cited(op.cite)}
        for op in ops
        for key in op.supersedes
    ]
    await _run(tx, _SUPERSEDES, supersedes)
    await _settle(tx, [key for op in ops for key in (op.key, *op.supersedes, *op.basis)])
    basis: list[Row] = [
        {"claim": op.key, "basis": key, "rel": cited(op.cite)} for op in ops for key in op.basis
    ]
    await _run(tx, _BASIS, basis)
    await _materialise(tx, [op.key for op in ops])


async def _settle(tx: AsyncManagedTransaction, keys: Iterable[str]) -> None:
    await _run(tx, _SETTLE, list(dict.fromkeys(keys)))


_ACCEPT: Final = (
    "MERGE (c:Claim {key: r.claim}) ON CREATE SET c.placeholder = true "
    "SET c += CASE WHEN c.acceptedBy IS NULL THEN r.acceptance ELSE {} END"
)
"""The first acceptance is the one kept (accepting again changes nothing)."""


async def _accepts(tx: AsyncManagedTransaction, ops: Sequence[AcceptClaim]) -> None:
    rows: list[Row] = [{"claim": op.claim, "acceptance": _acceptance(op.reviewer, op.cite.ts)} for op in ops]
    await _run(tx, _ACCEPT, rows)
    await _settle(tx, [op.claim for op in ops])
    await _materialise(tx, [op.claim for op in ops])


_ACCEPTED: Final = (
    "UNWIND $keys AS k MATCH (c:Claim {key: k}) "
    "WHERE c.accepted = true AND c.placeholder = false AND c.negated = false "
    "RETURN c.key AS key, c.predicate AS predicate, c.subjectKey AS subjectKey, c.subject AS subject, "
    "c.objectKey AS objectKey, c.object AS object, c.session AS session, c.seq AS seq, c.hash AS hash, "
    "c.acceptedAt AS at"
)
_RELATE: Final = (
    "MATCH (a:KnownEntity {{key: r.source}}) MATCH (b:KnownEntity {{key: r.target}}) "
    "MERGE (a)-[e:{relation} {{via: r.via}}]->(b) SET e += r.props"
)


async def _related(tx: AsyncManagedTransaction, rows_by_relation: dict[str, list[Row]]) -> None:
    for relation, rows in rows_by_relation.items():
        await _run(tx, _RELATE.format(relation=checked_relation(relation, "relation")), rows)


async def _materialise(tx: AsyncManagedTransaction, keys: list[str]) -> None:
    """The derived edge of each of `keys` that is recorded, accepted and not negated: cited to the claim,
    from the time it was accepted."""
    touches: list[Touch] = []
    by_relation: dict[str, list[Row]] = {}
    for row in await fetch(tx, _ACCEPTED, {"keys": list(dict.fromkeys(keys))}):
        relation = checked_relation(row["predicate"], "predicate")
        subject = EntityName(str(row["subjectKey"]), str(row["subject"]))
        obj = EntityName(str(row["objectKey"]), str(row["object"]))
        cite = Cite(str(row["session"]), int(row["seq"]), str(row["hash"]), str(row["at"]))
        touches += _touches([subject, obj], cite)
        by_relation.setdefault(relation, []).append(
            {
                "source": subject.key,
                "target": obj.key,
                "via": row["key"],
                "props": {"derived": True, **cited(cite)},
            }
        )
    await _touch(tx, touches)
    await _related(tx, by_relation)


async def _relations(tx: AsyncManagedTransaction, ops: Sequence[RelateEntities]) -> None:
    await _touch(tx, [touch for op in ops for touch in _touches([op.source, op.target], op.cite)])
    by_relation: dict[str, list[Row]] = {}
    for op in ops:
        by_relation.setdefault(op.relation, []).append(
            {
                "source": op.source.key,
                "target": op.target.key,
                "via": op.via,
                "props": {"derived": op.derived, **cited(op.cite)},
            }
        )
    await _related(tx, by_relation)


_CONTRADICTS: Final = (
    "MERGE (a:Claim {key: r.first}) ON CREATE SET a.placeholder = true "
    "MERGE (b:Claim {key: r.second}) ON CREATE SET b.placeholder = true "
    f"SET a.{LOCK} = true, b.{LOCK} = true REMOVE a.{LOCK}, b.{LOCK} "
    "WITH a, b, r OPTIONAL MATCH (a)-[x:CONTRADICTS]-(b) "
    "WITH a, b, r, count(x) AS found WHERE found = 0 "
    "CREATE (a)-[n:CONTRADICTS]->(b) SET n = r.props"
)
"""One `CONTRADICTS` per pair, whichever way it was first found, as first found: both claims write-locked,
then looked up either way (so two writers of one pair never make two)."""


async def _contradictions(tx: AsyncManagedTransaction, ops: Sequence[RecordContradiction]) -> None:
    pairs: dict[frozenset[str], Row] = {}
    for op in ops:
        props = {"trust": op.trust, "method": op.method, "edgeId": op.edge_id, **cited(op.cite)}
        pairs.setdefault(
            frozenset((op.first, op.second)), {"first": op.first, "second": op.second, "props": props}
        )
    await _run(tx, _CONTRADICTS, list(pairs.values()))
    await _settle(tx, [key for op in ops for key in (op.first, op.second)])


async def write_operations(tx: AsyncManagedTransaction, operations: Sequence[Operation]) -> None:
    """Apply `operations` (a batch's, in order, already `check_operations`ed) inside `tx`."""
    for kind, run in itertools.groupby(operations, key=type):
        ops: list[Any] = list(run)
        if kind is RecordObservation:
            await _observations(tx, ops)
        elif kind is RecordClaim:
            await _claims(tx, ops)
        elif kind is AcceptClaim:
            await _accepts(tx, ops)
        elif kind is RelateEntities:
            await _relations(tx, ops)
        else:
            await _contradictions(tx, ops)
