"""Citations a derived event makes, and the check every consumer runs on them before believing it.

Derived knowledge (causal edges, consolidation candidates and their promotion, inferred edges) names the
events it rests on by session, seq and hash. A citation that names no real event, or a real event with
another hash, would let a producer (or anyone who can append) dress up a guess as evidence, so consumers
refuse such an event into the dead-letter queue with the reason, exactly as they refuse a bad signature.

Each event type says what it cites through a function registered here (plug-ins register their own).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event, citation
from eventloom.schemas.catalogue import (
    CausalEdgeGenerated,
    CausalEdgeGeneratedV1,
    ConsolidationCandidateCreated,
    ConsolidationCandidatePromoted,
    ConsolidationCandidateReviewed,
    Evidence,
    InferenceEdgeGenerated,
    OutcomeExplained,
    SourceEvent,
)
from eventloom.schemas.registry import current_payload, load_plugin_event_types

UNCITED: Final = "uncited"
"""How the dead letter of an event with a bad citation starts (like `unverified` for a bad signature)."""


@dataclass(frozen=True)
class Cited:
    """One event a payload cites, and where in the payload it does (for the error message)."""

    field: str
    session: str
    seq: int
    hash: str

    @property
    def uri(self) -> str:
        return citation(self.session, self.seq, self.hash)


class CitationRule(msgspec.Struct, frozen=True):
    """What one event type cites (`cited`), and whether it must cite at least one event (`required`)."""

    cited: Callable[[Event, msgspec.Struct], list[Cited]]
    required: bool = False


_rules: dict[str, CitationRule] = {}


def register_citations(event_type: str, rule: CitationRule) -> None:
    """Declare what events of `event_type` cite; consumers then check every citation against the log."""
    _rules[event_type] = rule


def cited_events(event: Event) -> list[Cited]:
    """The events `event` cites (empty for types without a rule, and for payloads that fit no schema)."""
    load_plugin_event_types()  # a pack registers its types' rules with its schemas
    rule = _rules.get(event.type)
    if rule is None:
        return []
    try:
        payload = current_payload(event)
    except EventValidationError:
        return []
    return rule.cited(event, payload)


def citation_problem_without_lookup(event: Event) -> str | None:
    """What is wrong with `event`'s citations before any event is looked up: none where one is required,
    or one naming an event at or after itself in its own session (a hash chain cannot cite forward)."""
    load_plugin_event_types()
    rule = _rules.get(event.type)
    if rule is None:
        return None
    cited = cited_events(event)
    if rule.required and not cited:
        return f"{UNCITED}: a {event.type} must cite at least one event by seq and hash; this one cites none"
    for item in cited:
        if item.session == event.session and item.seq >= event.seq:
            return f"{UNCITED}: payload.{item.field} cites seq {item.seq}, not before this event's own seq"
    return None


Lookup = Callable[[str, int], Awaitable[str | None]]
"""(session, seq) -> the hash of that event in the log, or None when there is no such event."""


class KnownHashes:
    """The hashes of events this process has verified or read, by (session, seq), least recently used
    dropped past `limit`.

    One is shared by every consumer of a process (`EventLog.known_hashes`): each event is held once, not
    once per consumer, and a citation or a predecessor one consumer has checked costs the others no read
    from the stream. Only hashes of events that passed their own checks go in: the log never changes an
    event, so a remembered hash stays true. A hash is kept as its 32 bytes (a third of the hex string).

    What is looked up is recent (the predecessor of an event, the events a new one cites), so 25,000
    (~6 MB) is enough; a hash not remembered costs one read from the stream. 100,000 held ~24 MB of a node.
    """

    def __init__(self, limit: int = 25_000) -> None:
        self._hashes: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._limit = limit

    def __len__(self) -> int:
        return len(self._hashes)

    def remember(self, session: str, seq: int, event_hash: str) -> None:
        try:
            digest = bytes.fromhex(event_hash)
        except ValueError:
            return  # no event has such a hash: nothing worth remembering
        key = (sys.intern(session), seq)
        self._hashes[key] = digest
        self._hashes.move_to_end(key)
        while len(self._hashes) > self._limit:
            self._hashes.popitem(last=False)

    def recall(self, session: str, seq: int) -> str | None:
        """The hash of `session`'s event `seq`, or None when it is not known here."""
        key = (session, seq)
        found = self._hashes.get(key)
        if found is None:
            return None
        self._hashes.move_to_end(key)
        return found.hex()


class CitationChecker:
    """Checks citations against the log through `lookup`, remembering the hashes it has seen in `known`.

    Events a consumer has verified are recorded with `saw`, so a citation of a recent event costs nothing.
    """

    def __init__(self, lookup: Lookup, known: KnownHashes | None = None) -> None:
        self._lookup = lookup
        self.known = known if known is not None else KnownHashes()

    def saw(self, event: Event) -> None:
        self.known.remember(event.session, event.seq, event.hash)

    async def problem(self, event: Event) -> str | None:
        """None when every event `event` cites exists with the cited hash; else why not."""
        early = citation_problem_without_lookup(event)
        if early is not None:
            return early
        for item in cited_events(event):
            found = self.known.recall(item.session, item.seq)
            if found is None:
                found = await self._lookup(item.session, item.seq)
                if found is not None:
                    self.known.remember(item.session, item.seq, found)
            if found is None:
                return (
                    f"{UNCITED}: payload.{item.field} cites {item.uri}, but session {item.session} "
                    f"has no event {item.seq}"
                )
            if found != item.hash:
                return (
                    f"{UNCITED}: payload.{item.field} cites {item.uri}, but event {item.seq} of session "
                    f"{item.session} has hash {found[:12]}, not {item.hash[:12]}"
                )
        return None


def _evidence(event: Event, items: Iterable[Evidence], field: str = "evidence") -> list[Cited]:
    return [
        Cited(f"{field}[{index}]", item.session or event.session, item.event_seq, item.event_hash)
        for index, item in enumerate(items)
        if item.event_seq is not None and item.event_hash is not None
    ]


def _sources(event: Event, items: Iterable[SourceEvent], field: str) -> list[Cited]:
    return [Cited(f"{field}[{i}]", item.session, item.seq, item.hash) for i, item in enumerate(items)]


def _one(field: str, item: SourceEvent | None) -> list[Cited]:
    return [] if item is None else [Cited(field, item.session, item.seq, item.hash)]


def _causal(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, CausalEdgeGenerated | CausalEdgeGeneratedV1)
    return _evidence(event, payload.evidence)


def _inferred(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, InferenceEdgeGenerated)
    return _evidence(event, payload.evidence)


def _explained(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, OutcomeExplained)
    cause: list[Cited] = []
    if payload.cause_event_seq is not None and payload.cause_event_hash is not None:
        cause = [Cited("cause_event_seq", event.session, payload.cause_event_seq, payload.cause_event_hash)]
    return cause + _evidence(event, payload.evidence)


def _candidate(event: Event, payload: msgspec.Struct) -> list[Cited]:
    if not isinstance(payload, ConsolidationCandidateCreated):
        return []  # payload version 1 cites nothing; it projects as a legacy candidate, never promoted
    return _sources(event, payload.source_events, "source_events")


def _reviewed(event: Event, payload: msgspec.Struct) -> list[Cited]:
    if not isinstance(payload, ConsolidationCandidateReviewed):
        return []
    return _one("candidate_event", payload.candidate_event)


def _promoted(event: Event, payload: msgspec.Struct) -> list[Cited]:
    assert isinstance(payload, ConsolidationCandidatePromoted)
    return (
        _sources(event, payload.source_events, "source_events")
        + _one("candidate_event", payload.candidate_event)
        + _one("review_event", payload.review_event)
    )


for _type, _rule in {
    "causal.edge.generated": CitationRule(_causal, required=True),
    "inference.edge.generated": CitationRule(_inferred),
    "outcome.explained": CitationRule(_explained),
    "consolidation.candidate.created": CitationRule(_candidate),
    "consolidation.candidate.reviewed": CitationRule(_reviewed),
    "consolidation.candidate.promoted": CitationRule(_promoted, required=True),
}.items():
    register_citations(_type, _rule)
