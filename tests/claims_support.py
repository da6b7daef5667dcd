"""Shared by the claims tests (no tests here): the backend fixtures, a realistic story, projecting it.

`claims_store` is parametrized by backend, so tests/test_claims_contract.py runs unchanged on LadybugDB
and on a real Neo4j (`neo4j_endpoint`, provisioned once per run; its one database is cleared before each
test). Events are built the way the appender builds them (hash chain, contiguous seqs: `SessionLog`) and
go through the real `translate.changes`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from eventloom.event import Event
from gateway.packs.claims.ladybug_store import LadybugClaimsStore
from gateway.packs.claims.model import ClaimsChanges
from gateway.packs.claims.projector import ClaimsStore, ClearableClaimsStore
from gateway.packs.claims.translate import changes
from tests.test_graph_support import SessionLog, ts

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

PROJECTOR = "claims"
NEVER_PROJECTED = {"session": "c9", "seq": 1, "hash": "ab" * 32}
"""A basis in a session the model never sees: reported missing."""
ALICE = "Alice Smith"
_NEO4J_WRITTEN = importlib.util.find_spec("gateway.packs.claims.neo4j_store") is not None
BACKENDS = [
    "ladybug",
    pytest.param(
        "neo4j",
        marks=pytest.mark.skipif(not _NEO4J_WRITTEN, reason="the Neo4j claims store is not written yet"),
    ),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def open_store(backend: str, request: pytest.FixtureRequest, path: Path) -> ClaimsStore:
    """An empty, open store of `backend` (LadybugDB: at `path`; Neo4j: its database cleared)."""
    if backend == "ladybug":
        store = LadybugClaimsStore(path)
        await store.open()
        return store
    return await _neo4j_store(request.getfixturevalue("neo4j_endpoint"))


@pytest.fixture
async def claims_store(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[ClaimsStore]:
    store = await open_store(backend, request, tmp_path / "claims.lbug")
    try:
        yield store
    finally:
        await store.close()


async def _neo4j_store(endpoint: Neo4jEndpoint) -> ClearableClaimsStore:
    from gateway.packs.claims.neo4j_store import Neo4jClaimsStore  # noqa: PLC0415 (written in parallel)

    store = Neo4jClaimsStore(endpoint.uri, user=endpoint.user, password=endpoint.password)
    await store.open()
    await store.clear()
    return store


def translated(events: Sequence[Event]) -> list[ClaimsChanges]:
    return [changes(event) for event in events]


async def project(store: ClaimsStore, events: Sequence[Event], batch: int = 500) -> int:
    applied = 0
    for start in range(0, len(events), batch):
        applied += await store.apply(PROJECTOR, translated(events[start : start + batch]))
    return applied


def source(event: Event) -> dict[str, Any]:
    """A basis / supersedes / claim citation of `event`."""
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


class Story:
    """Two sessions about Alice Smith: `c1` (observations, claims, contradictions, a resolution,
    acceptances) and `c2` (applied after `c1`, though two claims of `c1` rest on it)."""

    def __init__(self) -> None:
        self.c1 = SessionLog("c1")
        self.c2 = SessionLog("c2")
        self.named: dict[str, Event] = {}

    def add(self, log: SessionLog, name: str, type: str, payload: dict[str, Any], at: float) -> Event:
        event = log.add(type, payload, at=at, actor="agent")
        self.named[name] = event
        return event

    def key(self, name: str) -> str:
        event = self.named[name]
        return f"{event.session}/{event.seq}"

    def citation(self, name: str) -> str:
        return self.named[name].citation

    def at(self, name: str) -> str:
        return self.named[name].ts

    def claim(
        self,
        log: SessionLog,
        name: str,
        at: float,
        subject: str,
        predicate: str,
        obj: str,
        confidence: float,
        basis: list[str | dict[str, Any]],
        **more: Any,
    ) -> Event:
        payload = {
            "subject": subject,
            "predicate": predicate,
            "object": obj,
            "confidence": confidence,
            "source_agent": more.pop("agent", "agent-a"),
            "basis": [source(self.named[b]) if isinstance(b, str) else b for b in basis],
            **more,
        }
        kind = "claims.claim.resolved" if "supersedes" in more else "claims.claim.asserted"
        if "supersedes" in more:
            payload["supersedes"] = [source(self.named[s]) for s in more["supersedes"]]
        return self.add(log, name, kind, payload, at)

    def contradiction(self, name: str, at: float, first: str, second: str, trust: float) -> Event:
        payload = {
            "source": self.key(first),
            "target": self.key(second),
            "relation_type": "contradicts",
            "confidence": trust,
            "method": "claims.contradiction",
        }
        return self.add(self.c1, name, "inference.edge.generated", payload, at)

    @property
    def events(self) -> list[Event]:
        """`c1`, then `c2`: the order a consumer reading session by session applies them."""
        return [*self.c1.events, *self.c2.events]


def alice_story() -> Story:
    """Alice Smith works at Acme Corp and lived in Paris, then Berlin; two agents conclude, a producer
    finds contradictions, a reviewer accepts, a Resolution settles where she lives."""
    s = Story()
    # c2 first: c1 cites it (its events are older), but it is applied after c1
    s.add(
        s.c2,
        "bob_obs",
        "claims.observation.recorded",
        {"content": "Bob knows Alice Smith.", "source": "email"},
        0.5,
    )
    s.claim(s.c2, "bob_knows", 0.6, "Bob", "KNOWS", ALICE, 0.7, ["bob_obs"], agent="agent-b")
    s.add(
        s.c1,
        "obs1",
        "claims.observation.recorded",
        {
            "content": "Alice Smith works at Acme Corp. Alice Smith lives in Paris.",
            "source": "chat",
            "observed_at": "2025-04-30T08:00:00+02:00",
        },
        1,
    )
    s.add(
        s.c1,
        "obs2",
        "claims.observation.recorded",
        {
            "content": "Bob said she moved to Berlin.",
            "source": "chat",
            "mentions": ["Bob", ALICE],
            "triples": [{"subject": ALICE, "predicate": "LIVES_IN", "object": "Berlin"}],
            "extracted_by": "llm:test",
        },
        2,
    )
    s.claim(s.c1, "paris", 3, ALICE, "LIVES_IN", "Paris", 0.6, ["obs1"])
    s.claim(
        s.c1, "berlin", 4, ALICE, "LIVES_IN", "Berlin", 0.8, ["obs2"], statement="Alice lives in Berlin now"
    )
    s.claim(s.c1, "acme", 5, ALICE, "WORKS_AT", "Acme Corp", 0.9, ["obs1"], agent="agent-b")
    s.claim(s.c1, "resident", 6, ALICE, "IS_A", "Berlin resident", 0.7, ["berlin", "obs2"])
    s.contradiction("paris_vs_berlin", 7, "berlin", "paris", 0.6)
    s.claim(s.c1, "not_acme", 8, ALICE, "WORKS_AT", "Acme Corp", 0.4, ["obs2"], negated=True)
    s.contradiction("acme_vs_not", 9, "not_acme", "acme", 0.4)
    s.add(
        s.c1,
        "accept_acme",
        "claims.claim.accepted",
        {"claim": source(s.named["acme"]), "reviewer": "carol"},
        10,
    )
    s.add(
        s.c1,
        "accept_not",
        "claims.claim.accepted",
        {"claim": source(s.named["not_acme"]), "reviewer": "carol"},
        11,
    )
    s.claim(
        s.c1,
        "settled",
        12,
        ALICE,
        "LIVES_IN",
        "Berlin",
        0.95,
        ["berlin", "obs2"],
        supersedes=["paris"],
        reason="she moved",
    )
    s.claim(s.c1, "bob_f", 13, "Bob", "KNOWS", ALICE, 0.5, ["bob_obs", "obs2"])
    s.claim(s.c1, "bob_g", 14, "Bob", "KNOWS", ALICE, 0.5, ["bob_knows"])
    s.claim(s.c1, "acme_kind", 15, "Acme Corp", "IS_A", "company", 0.3, ["obs1", NEVER_PROJECTED])
    s.contradiction("bob_vs_bob", 16, "bob_f", "bob_knows", 0.55)
    # accepted in c1 before c1's consumer has seen c2: a placeholder carries the mark till c2 fills it
    s.add(
        s.c1,
        "accept_bob",
        "claims.claim.accepted",
        {"claim": source(s.named["bob_knows"]), "reviewer": "dave"},
        17,
    )
    return s


RESOLUTION_AT = ts(12)
