"""The claims read model on a real Neo4j: its labels and relationship types (a predicate is a relationship
type of its own, a Resolution is `Claim:Resolution`), its schema, and its writes: a bad relation refused
before any Cypher runs, a failing batch writes nothing, re-applying changes nothing, placeholders filled
when their node comes, `clear` empties the model and only it, concurrent writers never duplicate a node.
The answers are the contract suite's (tests/test_claims_contract.py), on both backends."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, cast

import pytest
from neo4j.exceptions import Neo4jError

from eventloom.event import citation
from eventloom.settings import Settings
from gateway.packs.claims.model import (
    AcceptClaim,
    Cite,
    ClaimsChanges,
    EntityName,
    Operation,
    RecordClaim,
    RecordContradiction,
    RecordObservation,
    RelateEntities,
    entity_key,
    event_key,
)
from gateway.packs.claims.neo4j_plan import InvalidOperation
from gateway.packs.claims.neo4j_schema import LABELS, MIGRATIONS
from gateway.packs.claims.neo4j_store import Neo4jClaimsStore, neo4j_claims_store
from gateway.packs.claims.reads import AboutQuestion, ClaimQuestion, ContradictionsQuestion, EntityQuestion
from readmodels.view import ViewRequest

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio
S = "cl-neo4j"
PACK = "Observation|Claim|KnownEntity"


def _cite(seq: int, session: str = S) -> Cite:
    digest = hashlib.sha256(f"{session}/{seq}".encode()).hexdigest()
    return Cite(session, seq, digest, f"2026-03-01T10:{seq // 60:02d}:{seq % 60:02d}.000000Z")


def _entity(name: str) -> EntityName:
    return EntityName(entity_key(name), name)


def _changes(seq: int, operations: Sequence[Operation], session: str = S) -> ClaimsChanges:
    cite = _cite(seq, session)
    return ClaimsChanges(session, seq, cite.hash, list(operations))


def observe(
    seq: int,
    content: str,
    mentions: Sequence[str],
    triples: Sequence[tuple[str, str, str]] = (),
    session: str = S,
) -> ClaimsChanges:
    cite, key = _cite(seq, session), event_key(session, seq)
    ops: list[Operation] = [
        RecordObservation(
            key=key,
            content=content,
            source="notes",
            observed_at=cite.ts,
            extracted_by="deterministic",
            mentions=[_entity(name) for name in mentions],
            cite=cite,
        )
    ]
    ops += [
        RelateEntities(source=_entity(a), relation=p, target=_entity(b), derived=False, via=key, cite=cite)
        for a, p, b in triples
    ]
    return _changes(seq, ops, session)


def claim(
    seq: int,
    fact: tuple[str, str, str],
    basis: Sequence[str],
    *,
    supersedes: Sequence[str] = (),
    confidence: float = 0.8,
    negated: bool = False,
    session: str = S,
    **more: Any,
) -> ClaimsChanges:
    cite = _cite(seq, session)
    subject, predicate, obj = fact
    op = RecordClaim(
        key=event_key(session, seq),
        kind="resolution" if supersedes else "claim",
        subject=_entity(subject),
        predicate=predicate,
        object=_entity(obj),
        confidence=more.get("bad_confidence", confidence),
        source_agent="agent",
        negated=negated,
        statement=None,
        asserted_at=cite.ts,
        basis=list(basis),
        supersedes=list(supersedes),
        cite=cite,
    )
    return _changes(seq, [op], session)


def accept(seq: int, claimed: str) -> ClaimsChanges:
    return _changes(seq, [AcceptClaim(claim=claimed, reviewer="bob", cite=_cite(seq))])


def contradiction(seq: int, first: str, second: str, trust: float) -> ClaimsChanges:
    op = RecordContradiction(
        first=first,
        second=second,
        trust=trust,
        method="claims.contradiction",
        edge_id=f"x{seq}",
        cite=_cite(seq),
    )
    return _changes(seq, [op])


def k(seq: int, session: str = S) -> str:
    return event_key(session, seq)


def story() -> list[ClaimsChanges]:
    """Alice works at Acme (observed); two claims on where she lives contradict; a Resolution settles it."""
    return [
        observe(
            1,
            "Alice works at Acme and lives in Berlin.",
            ["Alice", "Acme", "Berlin"],
            [("Alice", "WORKS_AT", "Acme")],
        ),
        claim(2, ("Alice", "LIVES_IN", "Paris"), [k(1)], confidence=0.4),
        claim(3, ("Alice", "LIVES_IN", "Berlin"), [k(1)], confidence=0.7),
        contradiction(4, k(2), k(3), 0.9),
        claim(5, ("Alice", "LIVES_IN", "Berlin"), [k(1), k(3)], supersedes=[k(2)], confidence=0.95),
    ]


@pytest.fixture
async def store(neo4j_endpoint: Neo4jEndpoint) -> AsyncIterator[Neo4jClaimsStore]:
    settings = Settings(
        neo4j_uri=neo4j_endpoint.uri, neo4j_user=neo4j_endpoint.user, neo4j_password=neo4j_endpoint.password
    )
    async with neo4j_claims_store(settings) as opened:
        await opened.clear()
        yield opened


async def _dump(store: Neo4jClaimsStore) -> tuple[list[str], list[str]]:
    """Every node and relationship of the model, as sorted text (what two ways of writing must agree on)."""
    nodes = await store._rows(f"MATCH (n:{PACK}) RETURN labels(n) AS labels, properties(n) AS props", {})
    rels = await store._rows(
        f"MATCH (a:{PACK})-[e]->(b) RETURN type(e) AS type, a.key AS source, b.key AS target, "
        "properties(e) AS props",
        {},
    )
    as_text = [f"{sorted(row['labels'])} {sorted(row['props'].items())}" for row in nodes]
    rel_text = [
        f"{row['type']} {row['source']} {row['target']} {sorted(row['props'].items())}" for row in rels
    ]
    return sorted(as_text), sorted(rel_text)


async def test_labels_and_relationship_types_as_specified(store: Neo4jClaimsStore) -> None:
    assert await store.apply("cl-types", story()) == 5
    labels = await store._rows(f"MATCH (n:{PACK}) RETURN n.key AS key, labels(n) AS labels", {})
    by_key = {str(row["key"]): set(row["labels"]) for row in labels}
    assert by_key[k(1)] == {"Observation"}
    assert by_key[k(2)] == by_key[k(3)] == {"Claim"}
    assert by_key[k(5)] == {"Claim", "Resolution"}
    assert by_key["alice"] == by_key["acme"] == by_key["berlin"] == {"KnownEntity"}
    types = await store._rows(
        f"MATCH (a:{PACK})-[e]->(b:{PACK}) RETURN type(e) AS type, labels(a) AS a, labels(b) AS b, "
        "properties(e) AS props",
        {},
    )
    assert {row["type"] for row in types} == {
        "SUBJECT",
        "BASIS",
        "SUPERSEDES",
        "CONTRADICTS",
        "WORKS_AT",
        "LIVES_IN",
    }
    stated = [row for row in types if row["type"] == "WORKS_AT"]
    assert len(stated) == 1 and stated[0]["a"] == stated[0]["b"] == ["KnownEntity"]
    assert stated[0]["props"]["derived"] is False and stated[0]["props"]["via"] == k(1)
    derived = [row["props"] for row in types if row["type"] == "LIVES_IN"]  # the Resolution accepted itself
    assert len(derived) == 1 and derived[0]["derived"] is True and derived[0]["via"] == k(5)
    assert derived[0]["citation"] == citation(S, 5, _cite(5).hash)
    contradicts = [row["props"] for row in types if row["type"] == "CONTRADICTS"]
    assert [(x["trust"], x["method"], x["edgeId"]) for x in contradicts] == [
        (0.9, "claims.contradiction", "x4")
    ]

    about = await store.about(AboutQuestion(entity="ALICE "))
    assert [c.key for c in about] == [k(5), k(3)]  # the superseded claim left out, highest confidence first
    every = await store.about(AboutQuestion(entity="alice", include_superseded=True))
    assert [c.key for c in every] == [k(5), k(3), k(2)]
    assert every[2].superseded_by == k(5) and every[0].kind == "resolution" and every[0].accepted
    assert await store.contradictions(ContradictionsQuestion()) == []  # one side is superseded


async def test_the_schema_has_a_unique_key_per_label_and_the_read_indexes(store: Neo4jClaimsStore) -> None:
    rows = await store._rows("SHOW CONSTRAINTS YIELD name, labelsOrTypes, properties", {})
    unique = {tuple(row["labelsOrTypes"]) for row in rows if row["properties"] == ["key"]}
    assert {(label,) for label in LABELS} <= unique
    indexes = {row["name"]: row["state"] for row in await store._rows("SHOW INDEXES YIELD name, state", {})}
    for name in ("claims_claim_subject_order", "claims_contradiction_trust", "claims_claim_asserted"):
        assert indexes[name] == "ONLINE"
    again = Neo4jClaimsStore(store.uri, user=store._auth[0], password=store._auth[1])
    async with again:
        assert again.migrations_applied == []  # already there: opening again applies nothing


async def test_a_bad_relation_is_refused_before_any_cypher_runs(store: Neo4jClaimsStore) -> None:
    closed = Neo4jClaimsStore(store.uri, user="nobody", password="")  # never opened: any Cypher would fail
    injection = "WORKS_AT]->(x) DETACH DELETE x //"
    for relation, field in ((injection, "relation"), ("SUBJECT", "relation"), ("works at", "relation")):
        bad = observe(9, "Alice works at Acme.", ["Alice"], [("Alice", relation, "Acme")])
        with pytest.raises(InvalidOperation, match=f"^{field}: "):
            await closed.apply("cl-bad", [bad])
        with pytest.raises(InvalidOperation):
            await store.apply("cl-bad", [*story(), bad])
    with pytest.raises(InvalidOperation, match=r"^predicate: "):
        await store.apply("cl-bad", [claim(9, ("Alice", "BASIS", "Acme"), [k(1)])])
    assert await store.applied_seqs("cl-bad", [S]) == {}
    assert await _dump(store) == ([], [])


async def test_a_failing_batch_writes_nothing(store: Neo4jClaimsStore) -> None:
    unstorable = cast(Any, {"not": "a number"})  # Neo4j refuses a map as a property value
    bad = claim(6, ("Alice", "LIVES_IN", "Rome"), [k(1)], bad_confidence=unstorable)
    with pytest.raises(Neo4jError):
        await store.apply("cl-atomic", [*story(), bad])
    assert await store.applied_seqs("cl-atomic", [S]) == {}
    assert await _dump(store) == ([], [])


def crossing() -> list[ClaimsChanges]:
    """After `story`, in one batch with another session: an acceptance before the claim it accepts, one
    after (it changes nothing), and a Resolution resting on that claim."""
    other = "cl-other"
    return [
        accept(6, k(1, other)),
        claim(1, ("Alice", "WORKS_AT", "Acme"), [k(1)], session=other),
        accept(7, k(1, other)),
        claim(2, ("Alice", "LIVES_IN", "Berlin"), [k(1, other)], supersedes=[k(3)], session=other),
    ]


async def test_applying_again_or_one_by_one_writes_the_same(store: Neo4jClaimsStore) -> None:
    batch = [*story(), *crossing()]
    for item in batch:
        assert await store.apply("cl-one-by-one", [item]) == 1
    one_by_one = await _dump(store)
    await store.clear()
    assert await store.apply("cl-at-once", batch[:2]) == 2
    assert await store.applied_seqs("cl-at-once", [S, "elsewhere"]) == {S: 2}
    assert await store.apply("cl-at-once", batch) == len(batch) - 2  # the first two are below the checkpoint
    assert await _dump(store) == one_by_one
    assert await store.apply("cl-at-once", batch) == 0
    assert await store.apply("cl-other-projector", batch) == len(batch)  # its own checkpoint: writes again...
    assert await _dump(store) == one_by_one  # ...and every operation is idempotent: nothing changes
    accepted = await store._rows(
        "MATCH (c:Claim {key: $key}) RETURN c.acceptedBy AS by, c.acceptedAt AS at", {"key": "cl-other/1"}
    )
    assert accepted == [{"by": "bob", "at": _cite(6).ts}]  # the first acceptance stands
    alice = await store.entity(EntityQuestion(entity="alice"))
    assert alice is not None
    assert [(r.relation, r.via, r.derived) for r in alice.relations] == [
        ("LIVES_IN", "cl-neo4j/5", True),
        ("LIVES_IN", "cl-other/2", True),
        ("WORKS_AT", "cl-neo4j/1", False),
        ("WORKS_AT", "cl-other/1", True),
    ]


async def test_placeholders_are_filled_when_their_node_comes(store: Neo4jClaimsStore) -> None:
    early = "cl-early"
    # a claim resting on an observation and on a claim of a session applied later, accepted before that
    resting = claim(1, ("Bob", "KNOWS", "Carol"), [k(1, early), k(2, early)], session="cl-late")
    await store.apply("cl-ph", [resting])
    assert await store.apply("cl-ph", [accept(1, k(2, early))]) == 1
    placeholders = await store._rows(
        f"MATCH (n:{PACK}) WHERE n.placeholder = true RETURN labels(n) AS labels, properties(n) AS props", {}
    )
    assert sorted((row["labels"], row["props"]["key"]) for row in placeholders) == [
        (["Claim"], k(2, early)),  # accepted: a claim (the observation placeholder of its key folded in)
        (["Observation"], k(1, early)),  # only a basis so far: an observation until it turns out otherwise
    ]
    assert [set(row["props"]) for row in placeholders if row["labels"] == ["Observation"]] == [
        {"key", "placeholder"}
    ]
    before = await store.claim(ClaimQuestion(claim=k(1, "cl-late")))
    assert before is not None and before.missing_basis == [k(1, early), k(2, early)]

    await store.apply(
        "cl-ph",
        [
            _changes(1, observe(1, "Bob met Carol.", ["Bob", "Carol"], session=early).operations, early),
            claim(2, ("Carol", "WORKS_AT", "Acme"), [k(1, early)], session=early),
        ],
    )
    after = await store.claim(ClaimQuestion(claim=k(1, "cl-late")))
    assert after is not None and after.missing_basis == []
    left = await store._rows(f"MATCH (n:{PACK}) WHERE n.placeholder <> false RETURN n.key AS key", {})
    assert left == []
    kinds = await store._rows(
        "MATCH (:Claim {key: $key})-[:BASIS]->(b) RETURN b.key AS key, labels(b) AS labels ORDER BY key",
        {"key": k(1, "cl-late")},
    )
    assert [(row["key"], row["labels"]) for row in kinds] == [
        (k(1, early), ["Observation"]),
        (k(2, early), ["Claim"]),
    ]
    carol = await store.entity(EntityQuestion(entity="carol"))  # accepted before recorded: materialised now
    assert carol is not None
    assert [(r.source, r.relation, r.target, r.derived, r.via) for r in carol.relations] == [
        ("Carol", "WORKS_AT", "Acme", True, k(2, early))
    ]


async def test_clear_deletes_the_claims_model_only(store: Neo4jClaimsStore) -> None:
    await store.apply("cl-clear", story())
    await store._opened().execute_query(
        "MERGE (:Entity {uid: 'cl-clear-keep', key: 'alice'})", database_=store.database
    )
    await store.clear()
    assert await _dump(store) == ([], [])
    assert await store.applied_seqs("cl-clear", [S]) == {}
    kept = await store._rows("MATCH (e:Entity {uid: 'cl-clear-keep'}) RETURN count(e) AS n", {})
    assert kept == [{"n": 1}]
    migrations = await store._rows(
        "MATCH (m:Migration) WHERE m.name STARTS WITH 'claims_' RETURN m.name AS n", {}
    )
    assert {row["n"] for row in migrations} == {name for name, _ in MIGRATIONS}  # the schema stays
    await store._opened().execute_query(
        "MATCH (e:Entity {uid: 'cl-clear-keep'}) DELETE e", database_=store.database
    )
    assert await store.apply("cl-clear", story()) == 5  # rebuilt from the start


async def test_concurrent_writers_never_duplicate_a_node(store: Neo4jClaimsStore) -> None:
    """Two sessions written at once: both mention the same entities, and each claim of `left` rests on the
    claim of `right` recorded at the same time (a placeholder observation, or the claim itself)."""
    count, batch = 24, 8
    left: list[ClaimsChanges] = []
    right: list[ClaimsChanges] = []
    for i in range(1, count + 1):
        person = f"Person {i % 5}"
        left.append(observe(2 * i - 1, f"{person} works at Acme.", [person, "Acme"], session="cl-left"))
        left.append(claim(2 * i, (person, "KNOWS", "Acme"), [k(i, "cl-right")], session="cl-left"))
        right.append(claim(i, (person, "WORKS_AT", "Acme"), [k(2 * i - 1, "cl-left")], session="cl-right"))
    for start in range(0, count, batch):
        done = await asyncio.gather(
            store.apply("cl-writers", left[2 * start : 2 * (start + batch)]),
            store.apply("cl-writers", right[start : start + batch]),
        )
        assert list(done) == [2 * batch, batch]
    entities = await store._rows("MATCH (e:KnownEntity) RETURN e.key AS key, count(*) AS n", {})
    assert sorted(str(row["key"]) for row in entities) == ["acme", *(f"person {i}" for i in range(5))]
    twice = await store._rows(
        "MATCH (n) WHERE n:Observation OR n:Claim WITH n.key AS key, count(*) AS n WHERE n > 1 RETURN key", {}
    )
    assert twice == []
    placeholders = await store._rows(f"MATCH (n:{PACK}) WHERE n.placeholder = true RETURN n.key AS key", {})
    assert placeholders == []
    bases = await store._rows(
        "MATCH (c:Claim)-[:BASIS]->(b) WHERE c.session = 'cl-left' RETURN labels(b) AS labels, count(*) AS n",
        {},
    )
    assert bases == [{"labels": ["Claim"], "n": count}]


async def test_the_view_draws_the_model_in_scope(store: Neo4jClaimsStore) -> None:
    await store.apply("cl-view", story())
    drawn = await store.view(ViewRequest(focus="Alice", depth=2))
    ids = {node.id: node for node in drawn.nodes}
    assert {"claims:KnownEntity:alice", f"claims:Observation:{k(1)}", f"claims:Claim:{k(5)}"} <= set(ids)
    assert ids[f"claims:Claim:{k(5)}"].kind == "resolution" and ids[f"claims:Claim:{k(2)}"].superseded
    edges = {(e.type, e.source, e.target): e for e in drawn.edges}
    assert edges[("CONTRADICTS", f"claims:Claim:{k(2)}", f"claims:Claim:{k(3)}")].trust == 0.9
    assert edges[("CONTRADICTS", f"claims:Claim:{k(2)}", f"claims:Claim:{k(3)}")].system
    lives = edges[("LIVES_IN", "claims:KnownEntity:alice", "claims:KnownEntity:berlin")]
    assert lives.derived and not lives.system
    then = await store.view(ViewRequest(focus="alice", depth=2, as_of=_cite(4).ts))
    shown = {node.id: node for node in then.nodes}
    assert f"claims:Claim:{k(5)}" not in shown and not shown[f"claims:Claim:{k(2)}"].superseded
    now = await store.view(ViewRequest(focus="alice", depth=2, as_of="2026-03-01T11:00:00Z"))
    assert f"claims:Claim:{k(2)}" not in {node.id for node in now.nodes}  # superseded by then
    assert (await store.view(ViewRequest(sessions=["someone-else"]))).nodes == []
    assert (await store.view(ViewRequest(focus="graph:alice"))).nodes == []
    newest = await store.view(ViewRequest(limit=4))
    assert len(newest.nodes) <= 4 and newest.nodes[0].id == f"claims:Claim:{k(5)}"
