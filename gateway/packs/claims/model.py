"""What the claims read model is asked to write: backend-neutral operations, one list per event.

`translate.changes` turns an event into `ClaimsChanges`; a store (LadybugDB or Neo4j) applies each operation
in order, in the transaction that also moves its checkpoint. Node labels and the pack's own relationship
types come from the closed sets below; a triple's relation is a validated UPPER_SNAKE `Predicate`.

Keys: an observation or a claim is keyed by its event, `<session>/<seq>` (`event_key`); an entity by its
normalised name (`entity_key`: "Alice  Smith." and "alice smith" are one entity). A link may name a node
that is not projected yet (a basis in a session applied later): the store creates a placeholder with only
its key (`placeholder` true), and projecting the node fills it in.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, Literal, TypeAlias

import msgspec

NodeLabel: TypeAlias = Literal["Observation", "Claim", "KnownEntity"]
NODE_LABELS: Final[tuple[NodeLabel, ...]] = ("Observation", "Claim", "KnownEntity")
RESOLUTION_LABEL: Final = "Resolution"
"""On Neo4j a Resolution is `Claim:Resolution`; on LadybugDB a `Claim` row whose `kind` is `resolution`."""
SystemRel: TypeAlias = Literal["SUBJECT", "BASIS", "SUPERSEDES", "CONTRADICTS", "ACCEPTS"]
SYSTEM_RELS: Final[tuple[SystemRel, ...]] = ("SUBJECT", "BASIS", "SUPERSEDES", "CONTRADICTS", "ACCEPTS")
ClaimKind: TypeAlias = Literal["claim", "resolution"]
_SPACES = re.compile(r"\s+")
_EDGE_PUNCTUATION = " \t\n.,;:!?\"'`()[]{}"


def event_key(session: str, seq: int) -> str:
    """The key of the observation or claim that event (`session`, `seq`) records."""
    return f"{session}/{seq}"


def entity_key(name: str) -> str:
    """An entity's key: its name NFKC-normalised, case-folded, spaces collapsed, edge punctuation and a
    leading "the " dropped. Raises `ValueError` when nothing is left."""
    text = _SPACES.sub(" ", unicodedata.normalize("NFKC", name).casefold()).strip(_EDGE_PUNCTUATION)
    if text.startswith("the "):
        text = text[4:].strip(_EDGE_PUNCTUATION)
    if not text:
        raise ValueError(f"{name!r} names no entity")
    return text


LABEL_CHARS: Final = 80


def claim_label(subject: str, predicate: str, obj: str, negated: bool) -> str:
    """The text a claim is drawn (and searched) by: "Alice WORKS_AT Acme", "Alice NOT LIVES_IN Paris"."""
    return f"{subject} {'NOT ' if negated else ''}{predicate} {obj}"


def observation_label(content: str) -> str:
    """The text an observation is drawn (and searched) by: its content's first `LABEL_CHARS` characters,
    spaces collapsed (an ellipsis when cut)."""
    text = _SPACES.sub(" ", content).strip()
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


class Cite(msgspec.Struct, frozen=True, gc=False):
    """The event an operation comes from."""

    session: str
    seq: int
    hash: str
    ts: str  # the event's own timestamp, canonical RFC 3339 UTC


class EntityName(msgspec.Struct, frozen=True, gc=False):
    """An entity by key, with the name it was given (the first name given is the one kept)."""

    key: str
    name: str


class RecordObservation(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """An `Observation` node `key` (filled if a placeholder), `SUBJECT` to each entity it mentions (each
    created if absent). `observed_at`: when it was seen."""

    key: str
    content: str
    source: str
    observed_at: str
    extracted_by: str
    mentions: list[EntityName]
    cite: Cite


class RecordClaim(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """A `Claim` node `key` (kind `claim` or `resolution`), `SUBJECT` to its subject entity, `BASIS` to
    each basis key and, for a Resolution, `SUPERSEDES` to each key it settles (each marked with
    `supersededBy` = this key; a placeholder if absent).

    A Resolution is accepted by itself (`accepted` true). An accepted claim that is not negated
    materialises its edge: `RelateEntities(subject, object, predicate, derived=True, via=key)`. A claim
    found already marked accepted (its acceptance was applied first) materialises it now."""

    key: str
    kind: ClaimKind
    subject: EntityName
    predicate: str
    object: EntityName  # the object as an entity: its text is `object.name`
    confidence: float
    source_agent: str
    negated: bool
    statement: str | None
    asserted_at: str
    basis: list[str]
    supersedes: list[str]
    cite: Cite


class AcceptClaim(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Mark claim `claim` accepted (`accepted`, `acceptedBy`, `acceptedAt`) and materialise its edge as
    `RecordClaim` says; on a placeholder, only the mark (the edge comes when the claim is recorded). The
    first acceptance stands: accepting again changes nothing. The derived edge is cited to the claim and
    dated by the acceptance (`acceptedAt`), whichever of the two was applied first."""

    claim: str
    reviewer: str
    cite: Cite


class RelateEntities(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """Entity `source` -[relation]-> entity `target` (both created if absent). One edge per (source,
    relation, target, via): `derived` false for a triple an observation states (`via` the observation),
    true for an accepted claim's (`via` the claim)."""

    source: EntityName
    relation: str
    target: EntityName
    derived: bool
    via: str
    cite: Cite


class RecordContradiction(msgspec.Struct, frozen=True, gc=False, tag=True, tag_field="op", kw_only=True):
    """`CONTRADICTS` from claim `first` to claim `second` (placeholders if absent), one per pair whatever
    the direction (the first inferred stands): `trust`, `method`, `edgeId` and the citation of the
    inferred edge's event."""

    first: str
    second: str
    trust: float
    method: str
    edge_id: str
    cite: Cite


Operation: TypeAlias = RecordObservation | RecordClaim | AcceptClaim | RelateEntities | RecordContradiction


class ClaimsChanges(msgspec.Struct, frozen=True, gc=False):
    """One event's operations (none for an event the pack does not read), with its place in the log."""

    session: str
    seq: int
    event_hash: str
    operations: list[Operation] = msgspec.field(default_factory=list)
