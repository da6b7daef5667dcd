"""The claims store contract: every backend answers every question of `reads` the same way.

`claims_store` is parametrized by backend (tests/claims_support.py): LadybugDB and a real Neo4j. The story
(`alice_story`) is projected through the real `translate.changes`, session `c1` before `c2` as a
consumer applies them; answers are compared whole where they are small.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from gateway.packs.claims import reads
from gateway.packs.claims.model import Cite, ClaimsChanges, EntityName, RelateEntities
from gateway.packs.claims.projector import ClaimsStore
from gateway.packs.claims.reads import (
    AboutQuestion,
    BasisLink,
    ClaimQuestion,
    ClaimView,
    ContradictionsQuestion,
    EntityQuestion,
    InvalidQuestion,
    ObservationsQuestion,
    RelationView,
)
from readmodels.view import ViewGraph, ViewRequest
from tests import claims_support as support
from tests.claims_support import (
    ALICE,
    PROJECTOR,
    RESOLUTION_AT,
    Story,
    alice_story,
    open_store,
    project,
    translated,
)
from tests.test_graph_support import ts

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
claims_store = support.claims_store


@pytest.fixture
async def story(claims_store: ClaimsStore) -> Story:
    told = alice_story()
    assert await project(claims_store, told.events) == len(told.events)
    return told


async def everything(store: ClaimsStore, told: Story) -> dict[str, Any]:
    """Every question about the story, answered (as plain data, to compare two states of a store)."""
    answers = [
        await store.about(AboutQuestion(entity=ALICE, include_superseded=True)),
        await store.about(AboutQuestion(entity="Bob")),
        *[
            await store.basis(ClaimQuestion(claim=told.key(name)))
            for name in ("resident", "settled", "bob_g")
        ],
        await store.contradictions(ContradictionsQuestion()),
        *[await store.entity(EntityQuestion(entity=name)) for name in (ALICE, "Bob", "Berlin")],
        await store.observations(ObservationsQuestion(entity=ALICE)),
        await store.view(ViewRequest()),
    ]
    return {str(index): msgspec.to_builtins(answer) for index, answer in enumerate(answers)}


def keys(views: list[ClaimView]) -> list[str]:
    return [view.key for view in views]


# -- claims ----------------------------------------------------------------------------------------------


async def test_about_by_confidence_then_newest_without_superseded(
    claims_store: ClaimsStore, story: Story
) -> None:
    current = await claims_store.about(AboutQuestion(entity="alice  SMITH."))
    assert keys(current) == [story.key(n) for n in ("settled", "acme", "berlin", "resident", "not_acme")]
    every = await claims_store.about(AboutQuestion(entity=ALICE, include_superseded=True))
    assert keys(every) == [
        story.key(n) for n in ("settled", "acme", "berlin", "resident", "paris", "not_acme")
    ]
    assert every[4].superseded_by == story.key("settled")
    bob = await claims_store.about(AboutQuestion(entity="Bob"))  # two at 0.5: the newer first
    assert keys(bob) == [story.key(n) for n in ("bob_knows", "bob_g", "bob_f")]
    assert keys(await claims_store.about(AboutQuestion(entity=ALICE, limit=2))) == keys(current)[:2]
    assert await claims_store.about(AboutQuestion(entity="Nobody")) == []
    with pytest.raises(InvalidQuestion, match="entity"):
        await reads.answer(claims_store, "about", b'{"entity": "..."}')
    with pytest.raises(InvalidQuestion, match="limit"):
        await reads.answer(claims_store, "about", b'{"entity": "Bob", "limit": 0}')


async def test_a_claim_whole(claims_store: ClaimsStore, story: Story) -> None:
    berlin = await claims_store.claim(ClaimQuestion(claim=story.key("berlin")))
    assert berlin == ClaimView(
        key="c1/4",
        kind="claim",
        subject=ALICE,
        subject_key="alice smith",
        predicate="LIVES_IN",
        object="Berlin",
        confidence=0.8,
        source_agent="agent-a",
        statement="Alice lives in Berlin now",
        asserted_at=story.at("berlin"),
        session="c1",
        basis=[story.key("obs2")],
        citation=story.citation("berlin"),
    )
    settled = await reads.answer(claims_store, "claim", msgspec.json.encode({"claim": story.key("settled")}))
    assert (settled.kind, settled.supersedes, settled.accepted, settled.superseded_by) == (
        "resolution",
        [story.key("paris")],
        True,
        None,
    )
    paris = await claims_store.claim(ClaimQuestion(claim=story.key("paris")))
    assert paris is not None and paris.superseded_by == story.key("settled") and not paris.accepted
    negated = await claims_store.claim(ClaimQuestion(claim=story.key("not_acme")))
    assert negated is not None and negated.negated and negated.accepted
    unfounded = await claims_store.claim(ClaimQuestion(claim=story.key("acme_kind")))
    assert unfounded is not None
    assert (unfounded.basis, unfounded.missing_basis) == ([story.key("obs1"), "c9/1"], ["c9/1"])
    assert await claims_store.claim(ClaimQuestion(claim="c1/999")) is None
    assert await claims_store.claim(ClaimQuestion(claim="c9/1")) is None  # never projected


async def test_the_basis_chain_down_to_observations(claims_store: ClaimsStore, story: Story) -> None:
    chain = await claims_store.basis(ClaimQuestion(claim=story.key("resident")))
    assert chain is not None
    assert chain.root.key == story.key("resident")
    assert keys(chain.claims) == [story.key("berlin")]
    assert [o.key for o in chain.observations] == [story.key("obs2")]
    assert chain.links == [
        BasisLink(claim="c1/6", basis="c1/4", depth=1),
        BasisLink(claim="c1/6", basis="c1/2", depth=1),
        BasisLink(claim="c1/4", basis="c1/2", depth=2),
    ]
    assert chain.missing == []
    observed = chain.observations[0]
    assert (observed.content, observed.source, observed.extracted_by, observed.mentions) == (
        "Bob said she moved to Berlin.",
        "chat",
        "llm:test",
        ["Bob", ALICE, "Berlin"],
    )
    assert observed.citation == story.citation("obs2")
    across = await claims_store.basis(ClaimQuestion(claim=story.key("bob_g")))  # a claim in c2, on c2
    assert across is not None
    assert (keys(across.claims), [o.key for o in across.observations]) == (["c2/2"], ["c2/1"])
    unfounded = await claims_store.basis(ClaimQuestion(claim=story.key("acme_kind")))
    assert unfounded is not None
    assert ([o.key for o in unfounded.observations], unfounded.missing) == ([story.key("obs1")], ["c9/1"])
    assert await claims_store.basis(ClaimQuestion(claim="c1/999")) is None


# -- contradictions --------------------------------------------------------------------------------------


async def test_open_contradictions_highest_trust_first(claims_store: ClaimsStore, story: Story) -> None:
    found = await claims_store.contradictions(ContradictionsQuestion())
    pairs = [(c.first.key, c.second.key, c.trust) for c in found]
    assert pairs == [
        (story.key("bob_f"), story.key("bob_knows"), 0.55),
        (story.key("not_acme"), story.key("acme"), 0.4),
    ]
    first = found[0]
    assert (first.method, first.session, first.citation) == (
        "claims.contradiction",
        "c1",
        story.citation("bob_vs_bob"),
    )
    assert first.edge_id.startswith("contradiction-")
    about_alice = await claims_store.contradictions(ContradictionsQuestion(entity="alice smith"))
    assert [(c.first.key, c.second.key) for c in about_alice] == [(story.key("not_acme"), story.key("acme"))]
    assert len(await claims_store.contradictions(ContradictionsQuestion(limit=1))) == 1


async def test_a_contradiction_closes_when_a_resolution_supersedes_one_side(
    claims_store: ClaimsStore,
) -> None:
    told = alice_story()
    before = [e for e in told.c1.events if e.seq < told.named["settled"].seq]
    await project(claims_store, before)
    found = await claims_store.contradictions(ContradictionsQuestion(entity=ALICE))
    assert [(c.first.key, c.second.key, c.trust) for c in found] == [
        (told.key("berlin"), told.key("paris"), 0.6),
        (told.key("not_acme"), told.key("acme"), 0.4),
    ]
    await project(claims_store, told.events)
    found = await claims_store.contradictions(ContradictionsQuestion(entity=ALICE))
    assert [(c.first.key, c.second.key) for c in found] == [(told.key("not_acme"), told.key("acme"))]


# -- entities and observations ---------------------------------------------------------------------------


async def test_triples_and_derived_edges_of_accepted_claims(claims_store: ClaimsStore, story: Story) -> None:
    alice = await claims_store.entity(EntityQuestion(entity="ALICE SMITH"))
    assert alice is not None and (alice.key, alice.name) == ("alice smith", ALICE)

    def stated(source: str, relation: str, target: str, via: str, derived: bool, cited: str) -> RelationView:
        event = story.named[cited]
        return RelationView(
            source=source,
            relation=relation,
            target=target,
            derived=derived,
            via=story.key(via),
            session=event.session,
            citation=event.citation,
        )

    assert alice.relations == [  # by relation, source, target, then `via`
        stated("Bob", "KNOWS", ALICE, "bob_obs", False, "bob_obs"),
        stated("Bob", "KNOWS", ALICE, "bob_knows", True, "bob_knows"),  # accepted before it was projected
        stated(ALICE, "LIVES_IN", "Berlin", "settled", True, "settled"),  # a Resolution accepts itself
        stated(ALICE, "LIVES_IN", "Berlin", "obs2", False, "obs2"),
        stated(ALICE, "LIVES_IN", "Paris", "obs1", False, "obs1"),
        stated(ALICE, "WORKS_AT", "Acme Corp", "obs1", False, "obs1"),
        stated(ALICE, "WORKS_AT", "Acme Corp", "acme", True, "acme"),  # the negated one accepted: no edge
    ]
    berlin = await claims_store.entity(EntityQuestion(entity="berlin"))
    assert berlin is not None and [(r.source, r.via) for r in berlin.relations] == [
        (ALICE, "c1/12"),
        (ALICE, "c1/2"),
    ]
    assert await claims_store.entity(EntityQuestion(entity="Berlin resident")) is None  # never accepted
    assert await claims_store.entity(EntityQuestion(entity="Nobody")) is None


async def test_observations_of_an_entity_newest_first(claims_store: ClaimsStore, story: Story) -> None:
    seen = await claims_store.observations(ObservationsQuestion(entity=ALICE))
    assert [o.key for o in seen] == [story.key("obs2"), "c2/1", story.key("obs1")]
    first = seen[-1]
    assert (first.observed_at, first.extracted_by, first.mentions) == (
        "2025-04-30T06:00:00.000000Z",  # as observed, in UTC
        "deterministic",
        [ALICE, "Acme Corp", "Paris"],
    )
    assert [o.key for o in await claims_store.observations(ObservationsQuestion(entity=ALICE, limit=1))] == [
        "c1/2"
    ]
    assert await claims_store.observations(ObservationsQuestion(entity="Nobody")) == []


# -- writing: idempotence, batches, placeholders ---------------------------------------------------------


async def test_applying_a_batch_again_changes_nothing(claims_store: ClaimsStore, story: Story) -> None:
    before = await everything(claims_store, story)
    assert await claims_store.apply(PROJECTOR, translated(story.events)) == 0
    assert await everything(claims_store, story) == before
    assert await claims_store.applied_seqs(PROJECTOR, ["c1", "c2", "c3"]) == {
        "c1": len(story.c1.events),
        "c2": len(story.c2.events),
    }


async def test_a_batch_writes_what_events_one_by_one_write(
    claims_store: ClaimsStore, backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    told = alice_story()
    for event in told.events:
        assert await claims_store.apply(PROJECTOR, translated([event])) == 1
    one_by_one = await everything(claims_store, told)
    other = await open_store(backend, request, tmp_path / "other.lbug")  # Neo4j: the same database, cleared
    try:
        assert await project(other, told.events) == len(told.events)
        assert await everything(other, told) == one_by_one
    finally:
        await other.close()


async def test_a_batch_with_an_operation_that_cannot_be_written_writes_nothing(
    claims_store: ClaimsStore,
) -> None:
    told = alice_story()
    good = translated(told.c1.events[:3])
    bad_relation = RelateEntities(
        source=EntityName("alice", "Alice"),
        relation="lives in",  # not UPPER_SNAKE: never a relationship type
        target=EntityName("paris", "Paris"),
        derived=False,
        via="c1/1",
        cite=Cite("c1", 4, "ab" * 32, ts(4)),
    )
    with pytest.raises(Exception, match="lives in"):
        await claims_store.apply(PROJECTOR, [*good, ClaimsChanges("c1", 4, "ab" * 32, [bad_relation])])
    assert await claims_store.applied_seqs(PROJECTOR, ["c1"]) == {}
    assert await claims_store.view(ViewRequest()) == ViewGraph()
    assert await claims_store.apply(PROJECTOR, good) == 3  # and the store still writes


async def test_placeholders_are_filled_when_their_session_is_applied(claims_store: ClaimsStore) -> None:
    told = alice_story()
    await project(claims_store, told.c1.events)
    waiting = await claims_store.claim(ClaimQuestion(claim=told.key("bob_f")))
    assert waiting is not None and waiting.missing_basis == ["c2/1"]
    chain = await claims_store.basis(ClaimQuestion(claim=told.key("bob_g")))
    assert chain is not None and (chain.claims, chain.missing) == ([], ["c2/2"])
    assert await claims_store.claim(ClaimQuestion(claim="c2/2")) is None
    contradicted = await claims_store.contradictions(ContradictionsQuestion(entity="Bob"))
    assert contradicted == []  # one side is not projected yet
    bob = await claims_store.entity(EntityQuestion(entity="Bob"))
    assert bob is not None and [r.via for r in bob.relations if r.derived] == []

    await project(claims_store, told.c2.events)
    filled = await claims_store.claim(ClaimQuestion(claim=told.key("bob_f")))
    assert filled is not None and filled.missing_basis == []
    chain = await claims_store.basis(ClaimQuestion(claim=told.key("bob_g")))
    assert chain is not None and (keys(chain.claims), chain.missing) == (["c2/2"], [])
    accepted = await claims_store.claim(ClaimQuestion(claim="c2/2"))
    assert accepted is not None and accepted.accepted and accepted.citation == told.citation("bob_knows")
    contradicted = await claims_store.contradictions(ContradictionsQuestion(entity="Bob"))
    assert [(c.first.key, c.second.key) for c in contradicted] == [(told.key("bob_f"), "c2/2")]
    bob = await claims_store.entity(EntityQuestion(entity="Bob"))
    assert bob is not None and [r.via for r in bob.relations if r.derived] == ["c2/2"]


# -- the web view ----------------------------------------------------------------------------------------


def ids(graph: ViewGraph) -> set[str]:
    return {node.id for node in graph.nodes}


def edges(graph: ViewGraph) -> set[tuple[str, str, str]]:
    return {(edge.source, edge.target, edge.type) for edge in graph.edges}


def claim_id(told: Story, name: str) -> str:
    return f"claims:Claim:{told.key(name)}"


async def test_the_view_of_everything(claims_store: ClaimsStore, story: Story) -> None:
    graph = await claims_store.view(ViewRequest())
    kinds: dict[str, int] = {}
    for node in graph.nodes:
        kinds[node.kind] = kinds.get(node.kind, 0) + 1
    assert kinds == {"observation": 3, "claim": 9, "resolution": 1, "entity": 5}
    by_id = {node.id: node for node in graph.nodes}
    paris = by_id[claim_id(story, "paris")]
    assert (paris.superseded, paris.valid_from, paris.valid_to) == (True, story.at("paris"), RESOLUTION_AT)
    assert (paris.label, paris.session, paris.citations) == (
        f"{ALICE} LIVES_IN Paris",
        "c1",
        [story.citation("paris")],
    )
    assert by_id[claim_id(story, "not_acme")].label == f"{ALICE} NOT WORKS_AT Acme Corp"
    observed = by_id["claims:Observation:c1/1"]
    assert (observed.kind, observed.valid_from) == ("observation", "2025-04-30T06:00:00.000000Z")
    assert by_id["claims:KnownEntity:alice smith"].label == ALICE
    settled, alice = claim_id(story, "settled"), "claims:KnownEntity:alice smith"
    assert {
        (settled, claim_id(story, "paris"), "SUPERSEDES"),
        (settled, claim_id(story, "berlin"), "BASIS"),
        (settled, "claims:Observation:c1/2", "BASIS"),
        (settled, alice, "SUBJECT"),
        ("claims:Observation:c1/1", alice, "SUBJECT"),
        (alice, "claims:KnownEntity:berlin", "LIVES_IN"),
    } <= edges(graph)
    by_edge = {(e.source, e.target, e.type, e.derived): e for e in graph.edges}
    contradiction = by_edge[(claim_id(story, "berlin"), claim_id(story, "paris"), "CONTRADICTS", False)]
    assert (contradiction.system, contradiction.trust) == (True, 0.6)
    derived = by_edge[(alice, "claims:KnownEntity:berlin", "LIVES_IN", True)]
    assert (derived.system, derived.citation) == (False, story.citation("settled"))
    stated = by_edge[(alice, "claims:KnownEntity:berlin", "LIVES_IN", False)]
    assert stated.citation == story.citation("obs2")
    newest = await claims_store.view(ViewRequest(limit=2))
    assert [node.id for node in newest.nodes] == [claim_id(story, "acme_kind"), claim_id(story, "bob_g")]
    assert newest.edges == []


async def test_the_view_as_of_a_time(claims_store: ClaimsStore, story: Story) -> None:
    then = await claims_store.view(ViewRequest(as_of=ts(7.5)))
    assert claim_id(story, "not_acme") not in ids(then)  # asserted after
    paris = {node.id: node for node in then.nodes}[claim_id(story, "paris")]
    assert (paris.superseded, paris.valid_to) == (False, None)  # superseded only later
    assert (claim_id(story, "berlin"), claim_id(story, "paris"), "CONTRADICTS") in edges(then)
    assert all(edge.valid_from is not None and edge.valid_from <= ts(7.5) for edge in then.edges)
    assert not any(edge.derived for edge in then.edges)  # nothing accepted yet
    later = await claims_store.view(ViewRequest(as_of=RESOLUTION_AT))
    assert claim_id(story, "paris") not in ids(later)  # superseded at or before
    assert claim_id(story, "settled") in ids(later)


async def test_the_view_of_some_sessions_and_a_search(claims_store: ClaimsStore, story: Story) -> None:
    c2 = await claims_store.view(ViewRequest(sessions=["c2"]))
    assert ids(c2) == {
        "claims:Observation:c2/1",
        "claims:Claim:c2/2",
        "claims:KnownEntity:bob",
        "claims:KnownEntity:alice smith",
    }
    assert {edge.citation for edge in c2.edges} <= {story.citation("bob_obs"), story.citation("bob_knows")}
    assert await claims_store.view(ViewRequest(sessions=[])) == ViewGraph()
    found = await claims_store.view(ViewRequest(search="BERLIN"))
    assert ids(found) == {
        "claims:KnownEntity:berlin",
        claim_id(story, "berlin"),
        claim_id(story, "resident"),
        claim_id(story, "settled"),
        "claims:Observation:c1/2",
    }


async def test_the_view_around_a_focus(claims_store: ClaimsStore, story: Story) -> None:
    bob = await claims_store.view(ViewRequest(focus="bob"))
    assert ids(bob) == {
        "claims:KnownEntity:bob",
        "claims:KnownEntity:alice smith",  # KNOWS
        "claims:Observation:c1/2",
        "claims:Observation:c2/1",
        "claims:Claim:c2/2",
        claim_id(story, "bob_f"),
        claim_id(story, "bob_g"),
    }
    assert bob.nodes[0].id == "claims:KnownEntity:bob"
    resident = claim_id(story, "resident")
    near = await claims_store.view(ViewRequest(focus=resident))
    assert ids(near) == {
        resident,
        claim_id(story, "berlin"),
        "claims:Observation:c1/2",
        "claims:KnownEntity:alice smith",
    }
    farther = await claims_store.view(ViewRequest(focus=resident, depth=2, sessions=["c1"]))
    assert ids(near) < ids(farther) and "claims:Claim:c2/2" not in ids(farther)
    assert len((await claims_store.view(ViewRequest(focus=resident, depth=3, limit=5))).nodes) == 5
    assert await claims_store.view(ViewRequest(focus="claims:Claim:c1/999")) == ViewGraph()
    assert await claims_store.view(ViewRequest(focus="Nobody")) == ViewGraph()
