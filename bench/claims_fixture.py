"""The claims benchmark's load: observations, claims resting on them, contradictions and their resolutions.

One topic per person, in log order: two observations (in one of `FEEDS` sessions) mention the person, a
city, a company and a friend, with their triples (`LIVES_IN`, `WORKS_AT`, `KNOWS`); three agents (sessions
`agent-<n>`) claim those facts, each claim's basis chain 1 to 3 deep (on the topic's observations, or on an
earlier claim of the depth below, often another topic's in another session). One topic in three adds a
claim that conflicts with an earlier one (another city, or the company negated): about 10 % of the
claims. The contradiction producer's own pure functions (`held_claim`, `incompatible`, `derive`) find the
incompatible pairs, and their `inference.edge.generated` events follow the conflicting claim in its
session, as the producer would append them. Half of the conflicts are settled by a Resolution (session
`resolver`, superseding both sides), and a reviewer (session `review`) accepts one claim in five.

Events are hashed and signed (a fixed Ed25519 seed) in memory, so the benchmark measures the read model,
not the bus. The stream is cut at exactly `count` events: a prefix of a log, so every citation points back.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
from nacl.signing import SigningKey
from workflow_fixture import Sessions

from eventloom.event import Event
from eventloom.keys import Signer
from gateway.packs.claims.producer import HeldClaim, derive, held_claim, incompatible

FEEDS: Final = 8
AGENTS: Final = 3
CITIES: Final = ("Paris", "London", "Berlin", "Lisbon", "Oslo", "Madrid", "Vienna", "Prague", "Dublin")
COMPANIES: Final = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark Industries", "Wayne Enterprises")
RECENT: Final = 200
"""Claims of each depth kept to be rested on: a basis is a recent claim, as an agent's would be."""


def person(index: int) -> str:
    return f"Person {index:06d}"


@dataclass
class SignedSessions(Sessions):
    """`Sessions` (hash chains, a forward clock) whose events are also signed, as the appender's are."""

    signer: Signer = field(default_factory=lambda: Signer(SigningKey(bytes(range(32)))))

    def event(self, session: str, type: str, payload: dict[str, Any]) -> Event:
        hashed = super().event(session, type, payload)
        signature = self.signer.sign_hash(hashed.hash)
        return msgspec.structs.replace(hashed, sig=signature, key_id=self.signer.key_id)


def cite(event: Event) -> dict[str, Any]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


@dataclass
class Load:
    """What the benchmark asks about afterwards, gathered while the load is generated."""

    events: list[Event] = field(default_factory=list)
    people: list[str] = field(default_factory=list)
    deepest_claims: list[str] = field(default_factory=list)  # keys of claims with a basis chain 3 deep
    contradicted_people: list[str] = field(default_factory=list)  # with a contradiction left open
    incompatibility_checks: list[tuple[HeldClaim, HeldClaim, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class ClaimsLoad:
    """Generates the topics, one after another, keeping the producer's view of the claims seen."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.sessions = SignedSessions()
        self.load = Load()
        self.by_depth: dict[int, list[Event]] = {1: [], 2: [], 3: []}
        self.groups: dict[tuple[str, str], list[HeldClaim]] = defaultdict(list)

    def emit(self, session: str, type: str, payload: dict[str, Any]) -> Event:
        event = self.sessions.event(session, type, payload)
        self.load.events.append(event)
        self.load.counts[type] += 1
        return event

    def claim(self, agent: int, fact: tuple[str, str, str], observations: list[Event], **extra: Any) -> Event:
        """A claim of `fact` (subject, predicate, object), its basis chain 1 to 3 deep, and the
        contradiction edges the producer derives for it."""
        depth = self.rng.choice((1, 2, 3))
        while depth > 1 and not self.by_depth[depth - 1]:
            depth -= 1
        basis = [cite(o) for o in observations[: self.rng.choice((1, 2))]]
        if depth > 1:
            basis.insert(0, cite(self.rng.choice(self.by_depth[depth - 1])))
        subject, predicate, obj = fact
        payload = {
            "subject": subject,
            "predicate": predicate,
            "object": obj,
            "confidence": round(self.rng.uniform(0.4, 0.99), 2),
            "source_agent": f"agent-{agent}",
            "basis": basis,
            **extra,
        }
        kind = "claims.claim.resolved" if "supersedes" in payload else "claims.claim.asserted"
        session = "resolver" if kind == "claims.claim.resolved" else f"agent-{agent}"
        event = self.emit(session, kind, payload)
        recent = self.by_depth[depth]
        recent.append(event)
        del recent[:-RECENT]
        if depth == 3:
            self.load.deepest_claims.append(f"{event.session}/{event.seq}")
        self.contradictions(event)
        return event

    def contradictions(self, event: Event) -> int:
        """As the producer: compare with the group's earlier claims, append one edge per incompatible one."""
        found = held_claim(event)
        assert found is not None, "the fixture made a claim the producer cannot read"
        subject, predicate, new = found
        group = self.groups[(subject, predicate)]
        edges = 0
        for old in group:
            self.load.incompatibility_checks.append((new, old, predicate))
            if incompatible(new, old, predicate):
                derived = derive(new, old)
                self.emit(event.session, derived.type, derived.payload)
                edges += 1
        group.append(new)
        return edges

    def topic(self, index: int) -> None:
        name, rng = person(index), self.rng
        city, company, friend = rng.choice(CITIES), rng.choice(COMPANIES), person(rng.randrange(index + 1))
        feed = f"feed-{index % FEEDS}"
        first = self.emit(
            feed,
            "claims.observation.recorded",
            {
                "content": f"{name} lives in {city} and works at {company}.",
                "source": f"crm-{index % 17}",
                "mentions": [name, city, company],
                "triples": [
                    {"subject": name, "predicate": "LIVES_IN", "object": city},
                    {"subject": name, "predicate": "WORKS_AT", "object": company},
                ],
            },
        )
        second = self.emit(
            feed,
            "claims.observation.recorded",
            {
                "content": f"{name} met {friend} at the {company} offsite.",
                "source": "chat",
                "mentions": [name, friend, company],
                "triples": [{"subject": name, "predicate": "KNOWS", "object": friend}],
            },
        )
        self.load.people.append(name)
        facts = [(name, "LIVES_IN", city), (name, "WORKS_AT", company), (name, "KNOWS", friend)]
        claims = [self.claim(i, fact, [first, second]) for i, fact in enumerate(facts)]
        for claim in claims:
            if rng.random() < 0.2:
                self.emit("review", "claims.claim.accepted", {"claim": cite(claim), "reviewer": "carol"})
        if index % 3 == 0:
            self.conflict(index, name, claims, [first, second])

    def conflict(self, index: int, name: str, claims: list[Event], observations: list[Event]) -> None:
        """A claim that contradicts one of the topic's (another city, or the company negated); every other
        conflict is settled by a Resolution that restates the original and supersedes both."""
        agent = (index // 3) % AGENTS
        if self.rng.random() < 0.5:
            original = claims[0]
            other = self.rng.choice([c for c in CITIES if c != original.payload["object"]])
            conflicting = self.claim(agent, (name, "LIVES_IN", other), observations)
        else:
            original = claims[1]
            fact = (name, "WORKS_AT", original.payload["object"])
            conflicting = self.claim(agent, fact, observations, negated=True)
        if index % 2 == 0:
            payload = original.payload
            self.claim(
                agent,
                (name, payload["predicate"], payload["object"]),
                observations,
                supersedes=[cite(original), cite(conflicting)],
                reason="the newer observation settles it",
            )
        else:
            self.load.contradicted_people.append(name)


def claims_load(count: int, seed: int = 7) -> Load:
    """`count` events of topics (see the module), cut at exactly `count`."""
    generator = ClaimsLoad(seed)
    load = generator.load
    index = 0
    while len(load.events) < count:
        asked = [load.people, load.deepest_claims, load.contradicted_people]
        before = [len(names) for names in asked]
        generator.topic(index)
        index += 1
        if len(load.events) > count:  # the last topic is cut: ask nothing about it
            for names, length in zip(asked, before, strict=True):
                del names[length:]
    del load.events[count:]
    return load
