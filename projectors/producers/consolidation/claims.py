"""Claim merges: the same fact asserted several times, in one session or several -> one `claim` candidate.

A fact is identified by its normalised content: a relation by (source, relation_type, target), an entity by
(name, entity_type, summary); names compare case- and whitespace-insensitively. Entities asserted without a
summary say only that something exists, which is not a claim worth merging.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from eventloom.event import Event
from eventloom.schemas.catalogue_memory import EntityFact, MemoryFactAsserted, RelationFact
from projectors.producers._common import fit, read_payload
from projectors.producers.consolidation.occurrences import (
    PROPOSE_AT,
    Occurrence,
    Recorded,
    cited_once,
    family_key,
    record,
    sessions_of,
)
from projectors.producers.consolidation.proposal import Proposal, cite
from projectors.producers.consolidation.summaries import Summary
from projectors.protocol import ProducerState

SOURCE_TYPE: Final = "memory.fact.asserted"
METHOD: Final = "claim_repeated_v1"
TITLE_LIMIT: Final = 300


@dataclass(frozen=True)
class Claim:
    """One fact of an assertion: its identity (normalised) and how this assertion spelled it."""

    identity: tuple[str, ...]
    statement: str
    about: tuple[tuple[str, str], ...]
    relations: tuple[tuple[str, str, str], ...]


def normalise(name: str) -> str:
    return " ".join(name.split()).casefold()


def claims_of(fact: MemoryFactAsserted) -> list[Claim]:
    """The relations and summarised entities an assertion states, each once."""
    types = {entity.name: entity.entity_type for entity in fact.entities}
    found = {claim.identity: claim for claim in map(_entity_claim, fact.entities) if claim is not None}
    for relation in fact.relations:
        claim = _relation_claim(relation, types)
        found.setdefault(claim.identity, claim)
    return list(found.values())


def _entity_claim(entity: EntityFact) -> Claim | None:
    if not entity.summary or not entity.summary.strip():
        return None
    return Claim(
        identity=("entity", normalise(entity.name), entity.entity_type, normalise(entity.summary)),
        statement=f"{entity.name} ({entity.entity_type}): {entity.summary.strip()}",
        about=((entity.name, entity.entity_type),),
        relations=(),
    )


def _relation_claim(relation: RelationFact, types: dict[str, str]) -> Claim:
    ends = (relation.source, relation.target)
    return Claim(
        identity=("relation", normalise(relation.source), relation.relation_type, normalise(relation.target)),
        statement=f"{relation.source} {relation.relation_type} {relation.target}",
        about=tuple((name, types[name]) for name in ends if name in types),
        relations=((relation.source, relation.relation_type, relation.target),),
    )


async def claim_proposals(event: Event, state: ProducerState) -> list[Proposal]:
    """Records each fact `event` asserts; proposes a claim at its 2nd, 5th and 25th assertion."""
    if event.type != SOURCE_TYPE:
        return []
    fact = read_payload(event.payload, MemoryFactAsserted)
    if fact is None:
        return []
    proposals = []
    for claim in claims_of(fact):
        occurrence = Occurrence(id=event.hash, cited=[cite(event)])
        recorded = await record(state, family_key("claim", claim.identity), occurrence)
        if recorded is not None and recorded.ordinal in PROPOSE_AT:
            proposals.append(_proposal(claim, recorded))
    return proposals


def _proposal(claim: Claim, recorded: Recorded) -> Proposal:
    count, sessions = recorded.ordinal, sessions_of(recorded.occurrences)
    where = f"in {sessions} sessions" if sessions > 1 else "in one session"
    return Proposal(
        candidate_type="claim",
        cited=cited_once(recorded.occurrences),
        texts=(claim.statement,),
        summary=Summary(
            title=fit(claim.statement, TITLE_LIMIT),
            summary=f"Asserted {count} times {where}: {claim.statement}.",
        ),
        # Each independent repetition makes a mistaken one-off less likely, but repetition is not proof.
        confidence={2: 0.75, 5: 0.85}.get(count, 0.9),
        method=METHOD,
        purpose=f"One cited fact instead of {count} repeated assertions.",
        about=claim.about,
        relations=claim.relations,
    )
