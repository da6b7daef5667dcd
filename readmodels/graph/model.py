"""What the graph read model is asked to write: backend-neutral, frozen msgspec Structs.

An `EventProjection` is one event's spine entry plus the operations extraction derived from it. Every
operation carries its provenance (the event's seq, hash and type, and the thread it came from) and the
instant it takes effect. Backends never see an `Event`: they see only these values, so LadybugDB and Neo4j
resolve and write exactly the same facts (`readmodels.graph.versioning` does the resolution once, in Python).

Entity and relation types become graph labels, so both are checked here against strict snake_case; a value
that does not match is refused when the Struct is built, long before any Cypher is written.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, Final, Literal, TypeAlias

import msgspec

from eventloom.event import citation

SNAKE_CASE: Final = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_TYPE_LENGTH: Final = 128
_RFC3339: Final = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$"
)
_CANONICAL_FORMAT: Final = "%Y-%m-%dT%H:%M:%S.%fZ"
_CANONICAL: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")

ObservationKind: TypeAlias = Literal[
    "OBSERVED_COMMAND", "OBSERVED_FILE_EDIT", "OBSERVED_TOOL_CALL", "HAS_CHECKPOINT"
]
OBSERVATION_KINDS: Final[tuple[ObservationKind, ...]] = (
    "OBSERVED_COMMAND",
    "OBSERVED_FILE_EDIT",
    "OBSERVED_TOOL_CALL",
    "HAS_CHECKPOINT",
)


class InvalidGraphWrite(ValueError):
    """A graph write that can never be applied: a bad type name, timestamp or shape."""


def check_snake_case(what: str, value: str) -> str:
    """`value` if it is strict snake_case of at most 128 characters, else `InvalidGraphWrite`."""
    if len(value) > MAX_TYPE_LENGTH or not SNAKE_CASE.fullmatch(value):
        raise InvalidGraphWrite(
            f"{what} {value!r} is not strict snake_case (^[a-z][a-z0-9_]*$, <= 128 chars)"
        )
    return value


def canonical_ts(value: str) -> str:
    """Any RFC 3339 timestamp as UTC with exactly six fractional digits and `Z` (the event `ts` form).

    Validity windows are stored in this form so that comparing two of them as strings compares instants,
    on every backend. Nanoseconds are truncated to microseconds.
    """
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise InvalidGraphWrite(f"{value!r} is not an RFC 3339 timestamp")
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    if zone in {"Z", "z"}:
        tz = UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        moment = datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "").ljust(6, "0")[:6]),
            tzinfo=tz,
        )
    except ValueError as exc:
        raise InvalidGraphWrite(f"{value!r} is not a valid instant: {exc}") from None
    return moment.astimezone(UTC).strftime(_CANONICAL_FORMAT)


def as_canonical(value: str) -> str:
    """`value` unchanged when it is already canonical (the common case), else `canonical_ts(value)`."""
    return value if _CANONICAL.fullmatch(value) else canonical_ts(value)


def ts_after(canonical: str) -> str:
    """The canonical timestamp one microsecond after `canonical`."""
    moment = datetime.strptime(canonical, _CANONICAL_FORMAT).replace(tzinfo=UTC)
    return (moment + timedelta(microseconds=1)).strftime(_CANONICAL_FORMAT)


class Provenance(msgspec.Struct, gc=False, frozen=True, kw_only=True):
    """The event a fact was projected from, and the conversation thread it came from (if known)."""

    event_seq: int
    event_hash: str
    event_type: str
    source_thread: str | None = None


class SpineEvent(msgspec.Struct, gc=False, frozen=True, kw_only=True):
    """The `Event` node of the session spine: identity, chain links and a one-line summary."""

    session: str
    seq: int
    hash: str
    prev_hash: str | None
    type: str
    ts: str
    actor: str
    summary: str
    caused_by: tuple[str, ...] = ()

    @property
    def citation(self) -> str:
        return citation(self.session, self.seq, self.hash)


class EntityRef(msgspec.Struct, gc=False, frozen=True):
    """Names an entity: by name and type, or by name alone (then the store resolves the type)."""

    name: str
    entity_type: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidGraphWrite("an entity needs a non-empty name")
        if self.entity_type is not None:
            check_snake_case("entity_type", self.entity_type)


class EntityAssertion(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """An entity holds from `valid_from`, with this summary and these properties.

    Reassertion merges: a `None` summary keeps the current one, properties are merged key by key and a
    property whose value is `None` is removed. If that changes nothing, nothing is written.
    """

    name: str
    entity_type: str
    provenance: Provenance
    valid_from: str
    summary: str | None = None
    properties: dict[str, Any] = msgspec.field(default_factory=dict)

    def __post_init__(self) -> None:
        EntityRef(self.name, self.entity_type)

    @property
    def ref(self) -> EntityRef:
        return EntityRef(self.name, self.entity_type)


class RelationAssertion(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """A typed relation between the current versions of two entities, holding from `valid_from`.

    `inferred` relations are non-authoritative: they carry how sure their producer was (`confidence`), how
    it inferred them (`inference_method`) and the evidence; causal ones add `review_status` and
    `authority_status`. `edge_id` names an inferred edge so it can be retracted later.
    """

    source: EntityRef
    target: EntityRef
    relation_type: str
    provenance: Provenance
    valid_from: str
    properties: dict[str, Any] = msgspec.field(default_factory=dict)
    inferred: bool = False
    confidence: float | None = None
    inference_method: str | None = None
    evidence_event_hashes: tuple[str, ...] = ()
    evidence_event_seqs: tuple[int, ...] = ()
    evidence_citations: tuple[str, ...] = ()
    evidence_quotes: tuple[str, ...] = ()
    edge_id: str | None = None
    review_status: str | None = None
    authority_status: str | None = None
    derived_from_event_seq: int | None = None
    derived_from_event_hash: str | None = None

    def __post_init__(self) -> None:
        check_snake_case("relation_type", self.relation_type)
        if self.confidence is not None and not 0.0 <= self.confidence <= 1.0:
            raise InvalidGraphWrite(f"confidence {self.confidence} is outside [0, 1]")
        if self.inferred and (self.confidence is None or not self.inference_method):
            raise InvalidGraphWrite("an inferred relation needs `confidence` and `inference_method`")


class EntityInvalidation(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """The entity's current version stops holding at `invalid_at`; nothing is deleted."""

    name: str
    entity_type: str
    invalid_at: str
    provenance: Provenance
    reason: str | None = None

    def __post_init__(self) -> None:
        EntityRef(self.name, self.entity_type)


class RelationInvalidation(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """Every open relation `source -[relation_type]-> target` (by entity names) closes at `invalid_at`."""

    source: str
    target: str
    relation_type: str
    invalid_at: str
    provenance: Provenance
    reason: str | None = None

    def __post_init__(self) -> None:
        check_snake_case("relation_type", self.relation_type)


class EdgeRetraction(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """An inferred edge is withdrawn at `retracted_at`: by `edge_id`, or by source, target and type."""

    retracted_at: str
    provenance: Provenance
    edge_id: str | None = None
    source: str | None = None
    target: str | None = None
    relation_type: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.relation_type is not None:
            check_snake_case("relation_type", self.relation_type)
        named = self.source is not None and self.target is not None and self.relation_type is not None
        if self.edge_id is None and not named:
            raise InvalidGraphWrite("name the retracted edge by `edge_id` or by source, target and type")


class SourceCitation(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """A span of a source (file, document) cited by the event and/or by an entity asserted with it."""

    path: str
    provenance: Provenance
    line_start: int | None = None
    line_end: int | None = None
    checksum: str | None = None
    text: str | None = None
    cited_by_event: bool = True
    cited_by: EntityRef | None = None

    def __post_init__(self) -> None:
        if not self.path:
            raise InvalidGraphWrite("a source needs a path")
        if self.line_start is not None and self.line_end is not None and self.line_end < self.line_start:
            raise InvalidGraphWrite(f"line_end {self.line_end} is before line_start {self.line_start}")
        if self.cited_by is not None and self.cited_by.entity_type is None:
            raise InvalidGraphWrite("a citing entity must be named with its type")


class TaskObservation(msgspec.Struct, gc=False, frozen=True, kw_only=True, tag=True):
    """The event was observed while working on `task_id` (only when the event names the task itself)."""

    task_id: str
    kind: ObservationKind
    provenance: Provenance

    def __post_init__(self) -> None:
        if not self.task_id:
            raise InvalidGraphWrite("a task observation needs a task_id")
        if self.kind not in OBSERVATION_KINDS:
            raise InvalidGraphWrite(f"unknown observation kind {self.kind!r}")


GraphOp: TypeAlias = (
    EntityAssertion
    | RelationAssertion
    | EntityInvalidation
    | RelationInvalidation
    | EdgeRetraction
    | SourceCitation
    | TaskObservation
)


class EventProjection(msgspec.Struct, gc=False, frozen=True, kw_only=True):
    """One event's contribution to the graph: its spine node and the operations derived from it."""

    event: SpineEvent
    ops: tuple[GraphOp, ...] = ()
