"""Entity resolution: names compared (normalised, aliases, trigram vectors) and `same_as` proposed once."""

from __future__ import annotations

from typing import Any

import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.emitter import ProducerProjection
from projectors.plugins import PRODUCERS_GROUP, available, load_producer
from projectors.producers.entity_names import SIMILAR, blocking_keys, name_key, normalise, similarity
from projectors.producers.entity_resolution import (
    ALIAS,
    NORMALISED,
    TRIGRAM,
    EntityResolutionProducer,
    same_as_id,
)
from projectors.protocol import ProducerState
from tests.causal_support import MemoryState
from tests.runtime_support import drained, running

VARIANTS = [
    ("postgres database", "postgress database"),
    ("payment service", "payments service"),
    ("kubernetes cluster", "kubernetes clustr"),
    ("ledger mirror", "ledger mirrors"),
]
DISTINCT = [
    ("user service", "order service"),
    ("auth service", "auth server"),
    ("redis cache", "redis cluster"),
]


@pytest.mark.parametrize(
    "name",
    ["auth-service", "Auth Service", "auth_service", " auth  service. ", "AUTH.SERVICE", "Auth—Service"],
)
def test_spellings_of_one_name_normalise_alike(name: str) -> None:
    assert normalise(name) == "auth service"
    assert name_key(name) == name_key("AuthService") == "authservice"


def test_the_threshold_separates_the_fixtures() -> None:
    for a, b in VARIANTS:
        assert similarity(normalise(a), normalise(b)) >= SIMILAR, (a, b)
    for a, b in DISTINCT:
        assert similarity(normalise(a), normalise(b)) < SIMILAR, (a, b)
    assert similarity("auth service", "auth service") == pytest.approx(1.0)
    assert similarity("abc", "xyz") == 0.0


def test_blocking_keys_are_the_ends_of_the_name() -> None:
    assert blocking_keys("ledger mirror") == ("p:led", "s:ror")
    assert blocking_keys("") == ()


def test_the_pair_id_does_not_depend_on_order() -> None:
    assert same_as_id("s", "service", "a", "b") == same_as_id("s", "service", "b", "a")
    assert same_as_id("s", "service", "a", "b") != same_as_id("s", "component", "a", "b")
    assert same_as_id("s", "service", "a", "b") != same_as_id("t", "service", "a", "b")


class StateOnly:
    def __init__(self, state: MemoryState) -> None:
        self._state = state

    @property
    def state(self) -> ProducerState:
        return self._state

    async def event(self, session: str, seq: int) -> Event | None:
        raise AssertionError("entity resolution reads only its state")

    async def session_events(self, session: str, after_seq: int, upto_seq: int) -> list[Event]:
        raise AssertionError("entity resolution reads only its state")


def fact(seq: int, *entities: dict[str, Any], session: str = "s") -> Event:
    return Event(
        v=1,
        session=session,
        seq=seq,
        ts="2026-01-01T00:00:00.000000Z",
        type="memory.fact.asserted",
        actor="agent",
        payload={"entities": list(entities)},
        caused_by=[],
        prev_hash=None,
        hash=f"{seq:064x}",
        sig="",
        key_id="",
    )


def entity(name: str, entity_type: str = "service", **properties: Any) -> dict[str, Any]:
    return {"name": name, "entity_type": entity_type, "properties": properties}


async def run(events: list[Event], state: MemoryState | None = None) -> list[dict[str, Any]]:
    view = StateOnly(state or MemoryState())
    producer = EntityResolutionProducer()
    return [d.payload for e in events for d in await producer.process(e, view)]


@pytest.mark.anyio
async def test_each_method_proposes_once_and_never_an_entity_with_itself() -> None:
    events = [
        fact(1, entity("auth-service"), entity("auth-service", "component")),
        fact(2, entity("Auth Service"), entity("auth-service")),
        fact(3, entity("identity provider", aliases=["IdP", "identity provider"])),
        fact(4, entity("idp"), entity("ledger mirror")),
        fact(5, entity("ledger mirrors"), entity("user service"), entity("order service")),
        fact(6, entity("Auth Service"), entity("IDP")),
    ]
    proposals = await run(events)
    found = {(p["source"], p["target"]): p for p in proposals}
    assert set(found) == {
        ("Auth Service", "auth-service"),
        ("idp", "identity provider"),
        ("IDP", "identity provider"),
        ("ledger mirrors", "ledger mirror"),
    }
    assert found["Auth Service", "auth-service"]["method"] == NORMALISED
    assert found["idp", "identity provider"]["method"] == ALIAS
    trigram = found["ledger mirrors", "ledger mirror"]
    assert trigram["method"] == TRIGRAM and trigram["confidence"] < 0.75
    for payload in proposals:
        assert payload["relation_type"] == "same_as" and payload["review_status"] == "proposed"
        assert payload["source"] != payload["target"]
        cited = [(item["session"], item["event_seq"]) for item in payload["evidence"]]
        assert len(cited) == 2 and all(session == "s" for session, _ in cited)
    assert [e["event_seq"] for e in found["idp", "identity provider"]["evidence"]] == [4, 3]


@pytest.mark.anyio
async def test_an_alias_declared_after_the_entity_it_names_links_them() -> None:
    proposals = await run([fact(1, entity("IdP")), fact(2, entity("identity provider", aliases=["idp"]))])
    assert [(p["source"], p["target"], p["method"]) for p in proposals] == [
        ("identity provider", "IdP", ALIAS)
    ]


@pytest.mark.anyio
async def test_sessions_are_resolved_apart() -> None:
    proposals = await run([fact(1, entity("auth-service")), fact(1, entity("Auth Service"), session="t")])
    assert proposals == []


@pytest.mark.anyio
async def test_the_same_log_gives_the_same_proposals_and_a_rerun_repeats_its_own() -> None:
    events = [fact(1, entity("auth-service")), fact(2, entity("Auth Service"), entity("ledger mirrors"))]
    events.append(fact(3, entity("ledger mirror")))
    first, second = await run(events), await run(events)
    assert first == second and len(first) == 2
    state = MemoryState()
    await run(events, state)
    assert await run(events, state) == first  # a redelivered event derives what it derived (fences dedupe)
    later = fact(4, entity("AUTH SERVICE"), entity("ledger-mirror"))
    again = await run([later], state)
    assert {(p["source"], p["target"]) for p in again} == {
        ("AUTH SERVICE", "auth-service"),
        ("ledger-mirror", "ledger mirror"),  # the same name
        ("ledger-mirror", "ledger mirrors"),  # a similar one
    }


async def of_type(log: EventLog, session: str, event_type: str) -> list[Event]:
    return [e async for e in log.events(session) if e.type == event_type]


async def run_live(log: EventLog, settings: Settings) -> ProducerProjection:
    projection = ProducerProjection(load_producer("entity_resolution", settings), log)
    async with running(log, projection, role="producer") as runner:
        await drained(log, runner.consumer)
    return projection


@pytest.mark.anyio
async def test_live_proposals_cite_real_events_and_a_restart_emits_nothing_again(
    log: EventLog, settings: Settings
) -> None:
    assert "entity_resolution" in available(PRODUCERS_GROUP)  # so `eventloom up` runs it by default
    first = await log.append("s", "memory.fact.asserted", "agent", {"entities": [entity("auth-service")]})
    second = await log.append(
        "s",
        "memory.fact.asserted",
        "agent",
        {"entities": [entity("Auth Service", summary="x")], "relations": []},
    )
    await log.append(
        "s",
        "decision.made",
        "agent",
        {
            "decision_id": "d1",
            "title": "Rotate keys",
            "about": [{"name": "AuthService", "entity_type": "service"}],
        },
    )
    projection = await run_live(log, settings)
    edges = await of_type(log, "s", "inference.edge.generated")
    assert projection.emitted == 2 and len(edges) == 2
    by_target = {(e.payload["source"], e.payload["target"]): e for e in edges}
    assert set(by_target) == {("Auth Service", "auth-service"), ("AuthService", "auth-service")}
    edge = by_target["Auth Service", "auth-service"]
    assert edge.caused_by == [second.hash]
    for item in edge.payload["evidence"]:
        cited = [e async for e in log.events(item["session"]) if e.seq == item["event_seq"]]
        assert [e.hash for e in cited] == [item["event_hash"]]
    assert {i["event_hash"] for i in edge.payload["evidence"]} == {first.hash, second.hash}

    await log.append("s", "memory.fact.asserted", "agent", {"entities": [entity("auth_service")]})
    again = await run_live(log, settings)  # a new consumer run: replays nothing it emitted before
    edges = await of_type(log, "s", "inference.edge.generated")
    assert again.emitted == 1 and len(edges) == 3
    assert len({e.payload["edge_id"] for e in edges}) == 3
