"""The claims store contract, continued: time. Sessions reach a consumer in any order, so what a store keeps
must not depend on it where the model says so, and `as_of` compares instants, however it is written.

Parametrized by backend like tests/test_claims_contract.py (LadybugDB and a real Neo4j must agree).
"""

from __future__ import annotations

import msgspec
import pytest

from gateway.packs.claims import reads
from gateway.packs.claims.projector import ClaimsStore
from gateway.packs.claims.reads import ClaimQuestion, InvalidQuestion
from readmodels.view import ViewGraph, ViewNode, ViewRequest
from tests import claims_support as support
from tests.claims_support import ALICE, Story, alice_story, project, source
from tests.test_graph_support import ts

pytestmark = pytest.mark.anyio
backend = support.backend  # the fixtures, parametrized by backend
claims_store = support.claims_store


def by_id(graph: ViewGraph) -> dict[str, ViewNode]:
    return {node.id: node for node in graph.nodes}


async def test_an_acceptance_applied_before_its_resolution_stands(claims_store: ClaimsStore) -> None:
    """A Resolution accepts itself, but a reviewer's acceptance applied earlier (its session first) is the
    first acceptance: it stands, and dates the derived edge."""
    told = Story()
    observed = {"content": "Alice Smith lives in Rome.", "source": "chat"}
    told.add(told.c1, "obs", "claims.observation.recorded", observed, 1)
    told.claim(told.c1, "rome", 2, ALICE, "LIVES_IN", "Rome", 0.6, ["obs"])
    told.claim(told.c1, "settled", 3, ALICE, "LIVES_IN", "Rome", 0.9, ["obs"], supersedes=["rome"])
    accepted = {"claim": source(told.named["settled"]), "reviewer": "erin"}
    told.add(told.c2, "accept", "claims.claim.accepted", accepted, 5)
    await project(claims_store, [*told.c2.events, *told.c1.events])

    settled = f"claims:Claim:{told.key('settled')}"
    before = await claims_store.view(ViewRequest(as_of=ts(4)))
    assert by_id(before)[settled].properties["accepted"] is False  # accepted at ts(5), not at ts(3)
    assert not any(edge.derived for edge in before.edges)
    now = await claims_store.view(ViewRequest())
    assert by_id(now)[settled].properties["accepted"] is True
    derived = [(e.type, e.valid_from, e.citation) for e in now.edges if e.derived]
    assert derived == [("LIVES_IN", ts(5), told.citation("settled"))]
    view = await claims_store.claim(ClaimQuestion(claim=told.key("settled")))
    assert view is not None and view.accepted


async def test_an_entity_is_first_seen_by_its_earliest_sighting(claims_store: ClaimsStore) -> None:
    """`c2` is applied after `c1` though its events are older: Bob and Alice were first seen in `c2`, so
    they are in the view as of a time before `c1` began, cited to that sighting."""
    told = alice_story()
    await project(claims_store, told.events)
    early = await claims_store.view(ViewRequest(as_of=ts(0.55)))
    nodes = by_id(early)
    bob, alice = "claims:KnownEntity:bob", "claims:KnownEntity:alice smith"
    assert set(nodes) == {"claims:Observation:c2/1", bob, alice}
    assert nodes[bob].citations == nodes[alice].citations == [told.citation("bob_obs")]
    assert {(e.source, e.target, e.type) for e in early.edges} == {
        ("claims:Observation:c2/1", bob, "SUBJECT"),
        ("claims:Observation:c2/1", alice, "SUBJECT"),
        (bob, alice, "KNOWS"),
    }
    berlin = by_id(await claims_store.view(ViewRequest(focus="berlin")))["claims:KnownEntity:berlin"]
    assert berlin.citations == [told.citation("obs2")]  # seen in c1 only


async def test_as_of_compares_instants_however_written(claims_store: ClaimsStore) -> None:
    """A stored time has six fractional digits; `as_of` may have none, or an offset: 09:00:00Z is before
    09:00:00.500000Z (compared as text it would sort after it). What is not an RFC 3339 time is refused."""
    told = alice_story()
    await project(claims_store, told.c2.events)  # at ts(0.5) and ts(0.6)
    assert await claims_store.view(ViewRequest(as_of="2025-05-01T09:00:00Z")) == ViewGraph()
    offset = await claims_store.view(ViewRequest(as_of="2025-05-01T11:00:00.5+02:00"))
    assert "claims:Observation:c2/1" in by_id(offset) and "claims:Claim:c2/2" not in by_id(offset)
    assert offset == await claims_store.view(ViewRequest(as_of=ts(0.5)))
    for bad in ("yesterday", "2025-05-01T09:00:00", "2025-13-01T09:00:00Z"):
        with pytest.raises(InvalidQuestion, match="as_of"):
            await reads.answer(claims_store, reads.VIEW_QUESTION, msgspec.json.encode({"as_of": bad}))
