"""Entities asserted under several names -> proposed `same_as` links (`inference.edge.generated`).

Every entity a `memory.fact.asserted` asserts (and every entity a `decision.made` or `outcome.explained` is
`about`) is compared with the entities of the same type asserted before it in the same session (the graph
keeps entities per session, so that is where a link can join them). Three methods, best first:

| method | when | confidence |
|---|---|---|
| `same_as_normalised_name_v1` | the names are equal once normalised (`entity_names.name_key`) | 0.95 |
| `same_as_alias_v1` | one entity's `properties.aliases` names the other (normalised) | 0.85 |
| `same_as_trigram_v1` | cosine of character trigram vectors >= `entity_names.SIMILAR` | 0.75 x cosine |

A pair is proposed once, ever (`edge_id` depends on the two names and the type, not their order), with
`review_status` `proposed`; reads follow it only once a reviewer re-asserts it `accepted`. Its evidence
cites, by session, seq and hash, the event that asserted each of the two entities (for an alias, the event
that declared it).

The index of known entities is this producer's `log.state` (a KV bucket), so it survives restarts and is
shared by workers; every key is written with `create`, so the first writer wins and a retry of the same
event finds its own records again (the value names the event) and derives the same proposals:

- `e-<h>` per (session, type, name): the first assertion of the entity;
- `n-<h>` per (session, type, normalised name or alias): the first entity that claimed it;
- `b-<h>-<i>` per (session, type, blocking key), `i` < `BLOCK_SLOTS`: the entities in that block, which are
  all a new name's trigram vector is compared with (a full block takes no more members: bounded work);
- `p-<h>` per proposed pair: the event that proposed it.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

import msgspec

from eventloom.event import Event
from eventloom.schemas.catalogue_inference import OutcomeExplained
from eventloom.schemas.catalogue_memory import MemoryFactAsserted
from eventloom.schemas.catalogue_work import DecisionMade
from projectors.producers._common import edge_id, event_evidence, read_event, read_payload
from projectors.producers.entity_names import SIMILAR, blocking_keys, name_key, normalise, similarity
from projectors.protocol import CitedEvent, DerivedEvent, LogView, ProducerState

DERIVED_TYPE: Final = "inference.edge.generated"
RELATION_TYPE: Final = "same_as"
NORMALISED: Final = "same_as_normalised_name_v1"
ALIAS: Final = "same_as_alias_v1"
TRIGRAM: Final = "same_as_trigram_v1"
CONFIDENCE: Final[dict[str, float]] = {NORMALISED: 0.95, ALIAS: 0.85}
TRIGRAM_WEIGHT: Final = 0.75
BLOCK_SLOTS: Final = 32
MAX_ALIASES: Final = 16
_encode = msgspec.json.Encoder(order="sorted").encode


class Known(msgspec.Struct, frozen=True):
    """An entity as the index keeps it: its name and type, and the event that asserted it."""

    name: str
    entity_type: str
    seq: int
    hash: str


class Asserted(msgspec.Struct, frozen=True):
    name: str
    entity_type: str
    aliases: tuple[str, ...] = ()


class Proposal(msgspec.Struct, frozen=True):
    other: Known
    method: str
    confidence: float


def _key(kind: str, *parts: str) -> str:
    return f"{kind}-{hashlib.sha256(_encode(list(parts))).hexdigest()[:40]}"


def _aliases(properties: dict[str, Any]) -> tuple[str, ...]:
    found = properties.get("aliases")
    if not isinstance(found, list):
        return ()
    return tuple(a for a in found if isinstance(a, str) and a.strip())[:MAX_ALIASES]


def asserted_entities(event: Event) -> list[Asserted]:
    """The entities `event` asserts or is about, in payload order (none for other types)."""
    if event.type == "memory.fact.asserted":
        fact = read_payload(event.payload, MemoryFactAsserted)
        if fact is None:
            return []
        return [Asserted(e.name, e.entity_type, _aliases(e.properties)) for e in fact.entities]
    payload: DecisionMade | OutcomeExplained | None = None
    if event.type == "decision.made":
        payload = read_payload(event.payload, DecisionMade)
    elif event.type == "outcome.explained":
        payload = read_event(event, OutcomeExplained)
    return [] if payload is None else [Asserted(s.name, s.entity_type) for s in payload.about]


class _Index:
    """The producer's view of its KV state for one event in one session."""

    def __init__(self, state: ProducerState, event: Event) -> None:
        self.state = state
        self.event = event

    def me(self, entity: Asserted) -> Known:
        return Known(entity.name, entity.entity_type, self.event.seq, self.event.hash)

    async def claim(self, key: str, record: Known) -> Known:
        """The record stored under `key`: `record` if this call (or an earlier run of it) created it."""
        raw = None if await self.state.create(key, _encode(record)) else await self.state.get(key)
        return record if raw is None else msgspec.json.decode(raw, type=Known)

    async def first_assertion(self, entity: Asserted) -> bool:
        """True when this event is the entity's first assertion in the session."""
        mine = self.me(entity)
        key = _key("e", self.event.session, entity.entity_type, entity.name)
        return await self.claim(key, mine) == mine

    async def join_block(self, block: str, record: Known) -> list[Known]:
        """The block's members before `record`, which joins it unless full."""
        members: list[Known] = []
        base = _key("b", self.event.session, record.entity_type, block)
        for slot in range(BLOCK_SLOTS):
            member = await self.claim(f"{base}-{slot}", record)
            if member == record:
                break
            members.append(member)
        return members

    async def first_to_propose(self, pair_id: str) -> bool:
        key = _key("p", pair_id)
        mine = self.event.hash.encode()
        return await self.state.create(key, mine) or await self.state.get(key) == mine


async def _candidates(index: _Index, entity: Asserted, first: bool) -> list[Proposal]:
    mine = index.me(entity)
    own = name_key(entity.name)
    found: list[Proposal] = []
    keys = [(own, NORMALISED)] if first and own else []
    keys += [(name_key(a), ALIAS) for a in entity.aliases if name_key(a) not in {"", own}]
    for key, method in keys:
        claimant = await index.claim(_key("n", index.event.session, entity.entity_type, key), mine)
        if claimant.name != entity.name:
            chosen = ALIAS if method == ALIAS or name_key(claimant.name) != key else NORMALISED
            found.append(Proposal(claimant, chosen, CONFIDENCE[chosen]))
    spelled = normalise(entity.name)
    if first and own:
        for block in blocking_keys(spelled):
            for member in await index.join_block(block, mine):
                score = similarity(spelled, normalise(member.name))
                if name_key(member.name) != own and score >= SIMILAR:
                    found.append(Proposal(member, TRIGRAM, round(TRIGRAM_WEIGHT * score, 4)))
    return found


def same_as_id(session: str, entity_type: str, a: str, b: str) -> str:
    """The proposal's edge id: the same whichever of the two names comes first."""
    first, second = sorted((a, b))
    return edge_id("same", session, entity_type, first, second)


class EntityResolutionProducer:
    """Proposes `same_as` links between entities of one type asserted under different names."""

    name: str = "entity_resolution"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        entities = asserted_entities(event)
        if not entities:
            return []
        index = _Index(log.state, event)
        best: dict[str, Proposal] = {}
        order: list[tuple[str, Asserted]] = []
        for entity in entities:
            first = await index.first_assertion(entity)
            for proposal in await _candidates(index, entity, first):
                pair = same_as_id(event.session, entity.entity_type, entity.name, proposal.other.name)
                if pair not in best:
                    order.append((pair, entity))
                if pair not in best or proposal.confidence > best[pair].confidence:
                    best[pair] = proposal
        derived: list[DerivedEvent] = []
        for pair, entity in order:
            if await index.first_to_propose(pair):
                derived.append(self._derive(event, entity, pair, best[pair]))
        return derived

    def _derive(self, event: Event, entity: Asserted, pair: str, proposal: Proposal) -> DerivedEvent:
        other = proposal.other
        session = event.session
        evidence = [
            {**event_evidence(session, event.seq, event.hash), "session": session, "quote": entity.name},
            {**event_evidence(session, other.seq, other.hash), "session": session, "quote": other.name},
        ]
        payload = {
            "edge_id": pair,
            "source": entity.name,
            "target": other.name,
            "relation_type": RELATION_TYPE,
            "confidence": proposal.confidence,
            "method": proposal.method,
            "source_event_seq": event.seq,
            "source_event_hash": event.hash,
            "evidence": evidence,
            "review_status": "proposed",
        }
        return DerivedEvent(
            type=DERIVED_TYPE,
            payload=payload,
            key=pair,
            requires=[CitedEvent(session, other.seq, other.hash)],
        )
