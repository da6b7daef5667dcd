"""From an event to the claims read model's operations: pure, deterministic, one `ClaimsChanges` each.

- `claims.observation.recorded` -> `RecordObservation` (`observed_at` the payload's, else the event's
  time; mentions the payload's, else `extract.extract`'s, plus every triple's ends, one per entity key)
  and a non-derived `RelateEntities` per triple, `via` the observation.
- `claims.claim.asserted` / `claims.claim.resolved` -> `RecordClaim` (kind `claim` / `resolution`).
- `claims.claim.accepted` -> `AcceptClaim`.
- `inference.edge.generated` whose `relation_type` is `contradicts` and whose `source` and `target` are
  both claim keys (`<session>/<seq>`) -> `RecordContradiction` (`trust` its confidence; `edge_id` its own,
  else the producer's id of the pair).

Anything else, and any payload that fits no schema of its type (or names no entity), gives no operations:
the store still moves its checkpoint past it, so a bad event never blocks the consumer. Timestamps a
payload carries are made canonical UTC, so comparing two as strings compares instants on both backends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.schemas import decode_payload
from eventloom.schemas.catalogue_common import SourceEvent
from eventloom.schemas.catalogue_inference import InferenceEdgeGenerated
from gateway.packs.claims.events import ClaimAccepted, ClaimAsserted, ClaimResolved, ObservationRecorded
from gateway.packs.claims.extract import extract
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
from gateway.packs.claims.producer import contradiction_id
from readmodels.graph.model import InvalidGraphWrite, as_canonical

CONTRADICTS: Final = "contradicts"
INFERENCE_EDGE: Final = "inference.edge.generated"
CLAIM_KEY: Final = re.compile(r"^[A-Za-z0-9_-]{1,128}/[1-9][0-9]{0,18}$")
"""A claim's key, `event_key(session, seq)`: what a contradiction's ends must be."""


def _entities(names: Iterable[str]) -> list[EntityName]:
    """One `EntityName` per entity key, the first spelling kept."""
    found: dict[str, EntityName] = {}
    for name in names:
        key = entity_key(name)
        found.setdefault(key, EntityName(key, name))
    return list(found.values())


def _entity(name: str) -> EntityName:
    return EntityName(entity_key(name), name)


def _keys(sources: list[SourceEvent], own: str) -> list[str]:
    """The keys of `sources`, each once, never the event's own (`own`: a citation of itself cannot be
    true, and the consumer dead-letters it; projecting it would link a claim to itself)."""
    keys = dict.fromkeys(event_key(source.session, source.seq) for source in sources)
    keys.pop(own, None)
    return list(keys)


def _observation(event: Event, cite: Cite, p: ObservationRecorded) -> list[Operation]:
    key = event_key(event.session, event.seq)
    if p.mentions is None or p.triples is None:
        found = extract(p.content)
        mentions = found.mentions if p.mentions is None else p.mentions
        triples = found.triples if p.triples is None else p.triples
    else:
        mentions, triples = p.mentions, p.triples
    ends = [name for triple in triples for name in (triple.subject, triple.object)]
    operations: list[Operation] = [
        RecordObservation(
            key=key,
            content=p.content,
            source=p.source,
            observed_at=as_canonical(p.observed_at) if p.observed_at is not None else event.ts,
            extracted_by=p.extracted_by or "deterministic",
            mentions=_entities([*mentions, *ends]),
            cite=cite,
        )
    ]
    for triple in triples:
        operations.append(
            RelateEntities(
                source=_entity(triple.subject),
                relation=triple.predicate,
                target=_entity(triple.object),
                derived=False,
                via=key,
                cite=cite,
            )
        )
    return operations


def _claim(event: Event, cite: Cite, p: ClaimAsserted) -> list[Operation]:
    resolution = isinstance(p, ClaimResolved)
    key = event_key(event.session, event.seq)
    return [
        RecordClaim(
            key=key,
            kind="resolution" if resolution else "claim",
            subject=_entity(p.subject),
            predicate=p.predicate,
            object=_entity(p.object),
            confidence=p.confidence,
            source_agent=p.source_agent,
            negated=p.negated,
            statement=p.statement,
            asserted_at=event.ts,
            basis=_keys(p.basis, key),
            supersedes=_keys(p.supersedes, key) if isinstance(p, ClaimResolved) else [],
            cite=cite,
        )
    ]


def _accepted(event: Event, cite: Cite, p: ClaimAccepted) -> list[Operation]:
    return [AcceptClaim(claim=event_key(p.claim.session, p.claim.seq), reviewer=p.reviewer, cite=cite)]


def _inferred(event: Event, cite: Cite, p: InferenceEdgeGenerated) -> list[Operation]:
    if p.relation_type != CONTRADICTS or p.source == p.target:
        return []
    if not (CLAIM_KEY.fullmatch(p.source) and CLAIM_KEY.fullmatch(p.target)):
        return []  # a contradiction between things that are not claims: the graph's, not this model's
    return [
        RecordContradiction(
            first=p.source,
            second=p.target,
            trust=p.confidence,
            method=p.method,
            edge_id=p.edge_id or contradiction_id(p.source, p.target),
            cite=cite,
        )
    ]


_TRANSLATORS: Final[dict[str, Callable[[Event, Cite, Any], list[Operation]]]] = {
    "claims.observation.recorded": _observation,
    "claims.claim.asserted": _claim,
    "claims.claim.resolved": _claim,
    "claims.claim.accepted": _accepted,
    INFERENCE_EDGE: _inferred,
}
CLAIMS_READS: Final = frozenset(_TRANSLATORS)
"""The event types the model reads."""


def changes(event: Event) -> ClaimsChanges:
    """The operations `event` asks of the claims read model (none for any other event)."""
    translator = _TRANSLATORS.get(event.type)
    if translator is None:
        return ClaimsChanges(event.session, event.seq, event.hash)
    try:
        payload = decode_payload(event.type, event.payload)
        operations = translator(event, Cite(event.session, event.seq, event.hash, event.ts), payload)
    except (EventValidationError, InvalidGraphWrite, ValueError):
        return ClaimsChanges(event.session, event.seq, event.hash)
    return ClaimsChanges(event.session, event.seq, event.hash, operations)
