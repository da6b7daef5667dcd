"""Writing a batch of the claims model's operations to Neo4j, inside the caller's transaction.

First the claims the batch records or accepts are write-locked and read; `neo4j_plan` works out from them
the rows of every statement; then each statement runs once over its rows (`UNWIND $rows AS r ...`, in
chunks), in the order below. Labels and the pack's own relationship types in the Cypher text come from
closed sets; a triple's relation is the relationship type itself, checked (`neo4j_plan.checked_relation`)
before it is written into a statement. Every value is a parameter.

Placeholders. A link to a node not projected yet creates it with only its key and `placeholder: true`;
recording the node fills it in (`placeholder: false`). The target of `SUPERSEDES`, `CONTRADICTS` or an
acceptance is a claim, so its placeholder is a `Claim`; a basis may be an observation or a claim, so an
unknown one is an `Observation` placeholder, folded into the `Claim` (its `BASIS` links moved) when that
key turns out to be a claim (`_SETTLE`). `_SETTLE` first `MERGE`s the `Observation` of each key, which
takes the lock of its unique key until the transaction ends: of two writers, the second sees what the
first committed, so a key never ends up both a claim and a placeholder observation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from neo4j import AsyncManagedTransaction

from gateway.packs.claims.model import Operation
from gateway.packs.claims.neo4j_plan import checked_relation, claim_state, claims_to_lock, plan
from readmodels.neo4j.driver import fetch

ROWS_PER_STATEMENT: Final = 5_000
LOCK: Final = "claimsLock"
"""A property set and removed at once: how Cypher takes a node's write lock (nothing of it is stored)."""

_LOCK_CLAIMS: Final = (
    "UNWIND $keys AS k MERGE (c:Claim {key: k}) ON CREATE SET c.placeholder = true "
    f"SET c.{LOCK} = true REMOVE c.{LOCK} RETURN k AS key, properties(c) AS props"
)
"""The claims a batch records or accepts, each created as a placeholder if absent, write-locked in key
order: what `plan` reads of them holds until the transaction ends."""
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
_OBSERVATIONS: Final = (
    "MERGE (o:Observation {key: r.key}) SET o += r.props, o.placeholder = false "
    "WITH o, r UNWIND r.mentions AS m MATCH (e:KnownEntity {key: m}) "
    "MERGE (o)-[s:SUBJECT]->(e) SET s += r.rel"
)
_CLAIMS: Final = (
    "MERGE (c:Claim {key: r.key}) SET c += r.props, c.placeholder = false "
    "SET c += CASE WHEN r.acceptance IS NOT NULL AND c.acceptedBy IS NULL THEN r.acceptance ELSE {} END "
    "FOREACH (_ IN CASE WHEN r.resolution THEN [1] ELSE [] END | SET c:Resolution) "
    "WITH c, r MATCH (e:KnownEntity {key: r.subject}) MERGE (c)-[s:SUBJECT]->(e) SET s += r.rel"
)
_SUPERSEDES: Final = (
    "MATCH (c:Claim {key: r.claim}) "
    "MERGE (s:Claim {key: r.target}) ON CREATE SET s.placeholder = true "
    "SET s.supersededBy = r.claim, s.supersededAt = r.at "
    "MERGE (c)-[e:SUPERSEDES]->(s) SET e += r.rel"
)
_ACCEPT: Final = (
    "MERGE (c:Claim {key: r.claim}) ON CREATE SET c.placeholder = true "
    "SET c += CASE WHEN c.acceptedBy IS NULL THEN r.acceptance ELSE {} END"
)
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
_SETTLE: Final = (  # r: a key that may be a basis, or is a claim's
    "MERGE (o:Observation {key: r}) ON CREATE SET o.placeholder = true "
    "WITH o, r OPTIONAL MATCH (t:Claim {key: r}) "
    "WITH o, t WHERE t IS NOT NULL AND o.content IS NULL "
    "CALL (o, t) { MATCH (x)-[b:BASIS]->(o) MERGE (x)-[n:BASIS]->(t) SET n += properties(b) } "
    "DETACH DELETE o"
)
"""Lock each key's `Observation` (a placeholder if new); if the key is a claim (recorded or a placeholder),
fold that observation placeholder into it. Run for every key a claim is, or links to."""
_BASIS: Final = (
    "MATCH (c:Claim {key: r.claim}) "
    "OPTIONAL MATCH (t:Claim {key: r.basis}) OPTIONAL MATCH (o:Observation {key: r.basis}) "
    "WITH c, r, coalesce(t, o) AS target "
    "MERGE (c)-[b:BASIS]->(target) SET b += r.rel"
)
_RELATE: Final = (
    "MATCH (a:KnownEntity {{key: r.source}}) MATCH (b:KnownEntity {{key: r.target}}) "
    "MERGE (a)-[e:{relation} {{via: r.via}}]->(b) SET e += r.props"
)
"""One edge per (source, relation, target, via)."""


async def _run(tx: AsyncManagedTransaction, statement: str, rows: Sequence[Any]) -> None:
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        result = await tx.run(
            f"UNWIND $rows AS r {statement}", {"rows": list(rows[start : start + ROWS_PER_STATEMENT])}
        )
        await result.consume()


async def write_operations(tx: AsyncManagedTransaction, operations: Sequence[Operation]) -> None:
    """Apply `operations` (a batch's, in order, already `check_operations`ed) inside `tx`, as their
    docstrings in `model` say."""
    keys = claims_to_lock(operations)
    stored = await fetch(tx, _LOCK_CLAIMS, {"keys": keys}) if keys else []
    states = {str(row["key"]): claim_state(row["props"]) for row in stored}
    rows = plan(operations, states)
    await _run(tx, _ENTITIES, rows.entities)
    await _run(tx, _OBSERVATIONS, rows.observations)
    await _run(tx, _CLAIMS, rows.claims)
    await _run(tx, _SUPERSEDES, rows.supersedes)
    await _run(tx, _ACCEPT, rows.accepts)
    await _run(tx, _CONTRADICTS, rows.contradictions)
    await _run(tx, _SETTLE, rows.settle)
    await _run(tx, _BASIS, rows.basis)
    for relation, related in rows.relations.items():
        await _run(tx, _RELATE.format(relation=checked_relation(relation, "relation")), related)
