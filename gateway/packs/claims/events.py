"""The claims pack's event types: what was seen, what an agent concluded from it, and what settled it.

- `claims.observation.recorded`: raw content as seen, with its source and time, and (optionally) the
  entities it mentions and the triples extracted from it. An observation never asserts anything.
- `claims.claim.asserted`: an agent's conclusion (subject, predicate, object, confidence) resting on a
  `basis` of observations or other claims, each cited exactly (session, seq, hash). Consumers refuse a
  claim whose basis is not in the log (the citation rule below), and the pack's front doors refuse it
  before it is appended.
- `claims.claim.resolved`: a Resolution: a claim that settles others (`supersedes`).
- `claims.claim.accepted`: a reviewer accepts a claim, so it materialises an entity-to-entity edge marked
  as derived (a Resolution is accepted by itself).

Contradictions are not events of this pack: the contradiction producer emits `inference.edge.generated`
with `relation_type` `contradicts` between two claims (see `producer.py`).
"""

from __future__ import annotations

from typing import Annotated, Final, TypeAlias

import msgspec
from msgspec import Meta

from eventloom.citations import CitationRule, Cited, register_citations
from eventloom.event import Event
from eventloom.schemas import register_event_type
from eventloom.schemas.catalogue_common import Confidence, Name, Payload, SourceEvent, Text, Timestamp
from gateway.packs.claims.examples import CLAIMS_EXAMPLES

PREDICATE: Final = r"^[A-Z][A-Z0-9_]{0,63}$"
Predicate: TypeAlias = Annotated[str, Meta(pattern=PREDICATE)]
"""A relation in UPPER_SNAKE_CASE (`IS_NAMED`, `LIVES_IN`); the front doors turn "lives in" into it."""
RESERVED_PREDICATES: Final = frozenset(
    {"SUBJECT", "BASIS", "SUPERSEDES", "CONTRADICTS", "MENTIONS", "RELATES", "ACCEPTS"}
)
"""Relationship types of the pack's own structure, never a triple's predicate."""
Content: TypeAlias = Annotated[str, Meta(min_length=1, max_length=1_000_000)]
Basis: TypeAlias = Annotated[list[SourceEvent], Meta(min_length=1, max_length=100)]
Superseded: TypeAlias = Annotated[list[SourceEvent], Meta(min_length=1, max_length=100)]


class Triple(Payload, kw_only=True):
    """One fact stated in an observation: `subject` -[predicate]-> `object`, both entities by name."""

    subject: Name
    predicate: Predicate
    object: Name

    def __post_init__(self) -> None:
        if self.predicate in RESERVED_PREDICATES:
            raise ValueError(f"`predicate` {self.predicate} is one of the pack's own relationship types")


class ObservationRecorded(Payload, kw_only=True):
    """`claims.observation.recorded`: something seen, kept verbatim; it never creates a claim.

    `mentions` and `triples` are what extraction found when it was recorded (`extracted_by`: `deterministic`
    or `llm:<model>`). Left out (None), the read model extracts them deterministically, so a replay gives
    the same graph."""

    content: Content
    source: Name
    observed_at: Timestamp | None = None  # default: the event's own time
    mentions: list[Name] | None = None
    triples: list[Triple] | None = None
    extracted_by: Name | None = None


class ClaimAsserted(Payload, kw_only=True):
    """`claims.claim.asserted`: an agent concludes `subject` `predicate` `object` with `confidence`."""

    subject: Name
    predicate: Predicate
    object: Name
    confidence: Confidence
    source_agent: Name
    basis: Basis
    negated: bool = False  # "Alice does NOT live in Paris"
    statement: Text | None = None  # the claim in the agent's words, when it has them

    def __post_init__(self) -> None:
        if self.predicate in RESERVED_PREDICATES:
            raise ValueError(f"`predicate` {self.predicate} is one of the pack's own relationship types")


class ClaimResolved(ClaimAsserted, kw_only=True):
    """`claims.claim.resolved`: a Resolution, a claim that settles the claims it `supersedes`."""

    supersedes: Superseded
    reason: Text | None = None


class ClaimAccepted(Payload, kw_only=True):
    """`claims.claim.accepted`: `claim` is accepted, so it materialises its derived edge."""

    claim: SourceEvent
    reviewer: Name
    reason: Text | None = None


CLAIMS_EVENT_TYPES: Final[dict[str, type[msgspec.Struct]]] = {
    "claims.observation.recorded": ObservationRecorded,
    "claims.claim.asserted": ClaimAsserted,
    "claims.claim.resolved": ClaimResolved,
    "claims.claim.accepted": ClaimAccepted,
}
OBSERVATION: Final = "claims.observation.recorded"
CLAIM_TYPES: Final = frozenset({"claims.claim.asserted", "claims.claim.resolved"})


def _sources(items: list[SourceEvent], field: str) -> list[Cited]:
    return [Cited(f"{field}[{i}]", item.session, item.seq, item.hash) for i, item in enumerate(items)]


def _claim_cites(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, ClaimAsserted)
    cited = _sources(payload.basis, "basis")
    if isinstance(payload, ClaimResolved):
        cited += _sources(payload.supersedes, "supersedes")
    return cited


def _accepted_cites(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, ClaimAccepted)
    return _sources([payload.claim], "claim")


def register() -> None:
    """Entry point `eventloom.event_types`: the schemas, and what each type cites."""
    for event_type, schema in CLAIMS_EVENT_TYPES.items():
        register_event_type(event_type, schema, example=CLAIMS_EXAMPLES[event_type])
    for event_type in CLAIM_TYPES:
        register_citations(event_type, CitationRule(_claim_cites, required=True))
    register_citations("claims.claim.accepted", CitationRule(_accepted_cites, required=True))
