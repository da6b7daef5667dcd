"""The contradiction producer (entry point `eventloom.producers` `claims_contradictions`).

On every claim (`claims.claim.asserted`) and Resolution (`claims.claim.resolved`) it compares the claim with
the claims seen before it about the same subject with the same predicate, and emits one
`inference.edge.generated` (`relation_type` `contradicts`, `method` `claims.contradiction`) per earlier claim
it is incompatible with: `source` the new claim's key, `target` the earlier one's (`model.event_key`),
`evidence` and `requires` citing both claim events, `edge_id` the same whichever of the two came first.

Incompatible (`incompatible`), for two different claims with the same subject key and predicate:
- one is negated and the other is not, about the same object (`model.entity_key`): "Alice LIVES_IN Paris"
  and "Alice does NOT LIVES_IN Paris";
- both are positive and neither object's word set contains the other's, unless the predicate is in
  `MULTI_VALUED` (a person KNOWS many people): "LIVES_IN Paris" and "LIVES_IN London" contradict,
  "LIVES_IN Paris" and "LIVES_IN Paris, France" do not;
- never a Resolution and a claim it `supersedes` (it settles them), never two negated claims.

Trust (the edge's `confidence`) is the lower of the two claims' confidences: a contradiction is only as
strong as its weaker side (a 0.9 claim against a 0.2 guess is a 0.2 matter).

The claims seen are this producer's state: per (subject key, predicate), slots `g-<digest>-<i>` each holding
one claim, taken with `create` (one winner across workers). A claim compares itself with the slots before
its own, so a redelivered claim finds its own slot again and derives the same edges; a pair is derived by
whichever of its two claims is recorded second. At most `MAX_CLAIMS_PER_GROUP` claims are held per group:
one beyond is still compared with all of them, but not kept.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

import msgspec

from eventloom.event import Event, citation
from gateway.packs.claims.events import CLAIM_TYPES, ClaimAsserted, ClaimResolved
from gateway.packs.claims.model import entity_key, event_key
from projectors.protocol import CitedEvent, DerivedEvent, LogView, ProducerState

DERIVED_TYPE: Final = "inference.edge.generated"
RELATION_TYPE: Final = "contradicts"
METHOD: Final = "claims.contradiction"
MAX_CLAIMS_PER_GROUP: Final = 1000
MULTI_VALUED: Final = frozenset(
    {
        "KNOWS",
        "LIKES",
        "LOVES",
        "DISLIKES",
        "HAS",
        "OWNS",
        "USES",
        "SPEAKS",
        "VISITED",
        "MET",
        "WORKS_WITH",
        "FRIEND_OF",
        "MEMBER_OF",
        "PARENT_OF",
        "CHILD_OF",
        "SIBLING_OF",
        "RELATED_TO",
        "PART_OF",
        "CONTAINS",
        "IS_A",
        "HAS_SKILL",
        "AUTHORED",
        "DEPENDS_ON",
    }
)
"""Predicates a subject may hold with many objects at once: two positive claims of one never contradict
(a negated one still contradicts the positive claim of the same object)."""
_WORDS: Final = re.compile(r"\w+")
_encode = msgspec.json.Encoder(order="sorted").encode


class HeldClaim(msgspec.Struct, frozen=True):
    """A claim as the producer keeps it: what incompatibility and the edge need."""

    session: str
    seq: int
    hash: str
    object_key: str
    negated: bool
    confidence: float
    supersedes: tuple[str, ...] = ()  # keys of the claims a Resolution settles

    @property
    def key(self) -> str:
        return event_key(self.session, self.seq)


def object_words(object_key: str) -> frozenset[str]:
    return frozenset(_WORDS.findall(object_key))


def incompatible(new: HeldClaim, old: HeldClaim, predicate: str) -> bool:
    """Whether `new` and `old` (same subject key, same `predicate`) cannot both hold (see the module)."""
    if new.key == old.key or old.key in new.supersedes or new.key in old.supersedes:
        return False
    if new.negated != old.negated:
        return new.object_key == old.object_key
    if new.negated or predicate in MULTI_VALUED:
        return False
    mine, theirs = object_words(new.object_key), object_words(old.object_key)
    return not (mine <= theirs or theirs <= mine)


def contradiction_id(first: str, second: str) -> str:
    """The edge id of a pair of claim keys, whichever is named first."""
    return "contradiction-" + hashlib.sha256(_encode(sorted((first, second)))).hexdigest()[:32]


def trust(new: HeldClaim, old: HeldClaim) -> float:
    return min(new.confidence, old.confidence)


def held_claim(event: Event) -> tuple[str, str, HeldClaim] | None:
    """(subject key, predicate, the claim) of a claim event; None for any other event, a payload that does
    not fit, or a subject or object that names no entity."""
    if event.type not in CLAIM_TYPES:
        return None
    schema = ClaimResolved if event.type == "claims.claim.resolved" else ClaimAsserted
    try:
        claim = msgspec.convert(event.payload, schema, strict=True)
        subject, object_key = entity_key(claim.subject), entity_key(claim.object)
    except (msgspec.ValidationError, ValueError):
        return None
    supersedes = tuple(event_key(s.session, s.seq) for s in getattr(claim, "supersedes", ()))
    held = HeldClaim(
        event.session, event.seq, event.hash, object_key, claim.negated, claim.confidence, supersedes
    )
    return subject, claim.predicate, held


def group_key(subject_key: str, predicate: str) -> str:
    """The state key prefix of a (subject key, predicate): a digest, so any name makes a valid key."""
    return "g-" + hashlib.sha256(_encode([subject_key, predicate])).hexdigest()[:40]


async def earlier_claims(state: ProducerState, group: str, claim: HeldClaim) -> list[HeldClaim]:
    """The claims held in `group` before `claim`, which takes the first free slot (unless the group is
    full); a claim already held (a redelivery) gets the claims before its own slot."""
    value = _encode(claim)
    before: list[HeldClaim] = []
    for slot in range(MAX_CLAIMS_PER_GROUP):
        key = f"{group}-{slot}"
        held = None if await state.create(key, value) else await state.get(key)
        if held is None:
            return before
        member = msgspec.json.decode(held, type=HeldClaim)
        if member == claim:
            return before
        before.append(member)
    return before


class ContradictionProducer:
    """A `ProcessProducer`: proposes `contradicts` edges between incompatible claims."""

    name: str = "claims_contradictions"

    def __init__(self, context: object | None = None) -> None:
        """`context` is the plug-in context the entry-point loader passes; this producer needs nothing."""

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]:
        found = held_claim(event)
        if found is None:
            return []
        subject, predicate, claim = found
        earlier = await earlier_claims(log.state, group_key(subject, predicate), claim)
        return [derive(claim, old) for old in earlier if incompatible(claim, old, predicate)]


def derive(new: HeldClaim, old: HeldClaim) -> DerivedEvent:
    """The `contradicts` edge from claim `new` to the earlier claim `old`."""
    pair = contradiction_id(new.key, old.key)
    evidence: list[dict[str, Any]] = [
        {
            "session": held.session,
            "event_seq": held.seq,
            "event_hash": held.hash,
            "citation": citation(held.session, held.seq, held.hash),
        }
        for held in (new, old)
    ]
    payload: dict[str, Any] = {
        "edge_id": pair,
        "source": new.key,
        "target": old.key,
        "relation_type": RELATION_TYPE,
        "confidence": trust(new, old),
        "method": METHOD,
        "source_event_seq": new.seq,
        "source_event_hash": new.hash,
        "evidence": evidence,
        "review_status": "proposed",
    }
    requires = [CitedEvent(held.session, held.seq, held.hash) for held in (new, old)]
    return DerivedEvent(type=DERIVED_TYPE, payload=payload, key=pair, requires=requires)
