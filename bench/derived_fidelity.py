"""The log as bench/derived.py reads it back (`LogIndex`), and the citation fidelity of what was derived.

Citation fidelity: every candidate and every derived edge in the log is checked, each counting once. It
holds when (1) it cites at least one event, (2) every event it cites (`eventloom.citations.cited_events`, the
rule the consumers apply) exists with the cited hash, and (3) the cited events say what it claims:

- a `claim` candidate: each cited event is a `memory.fact.asserted` asserting one of the candidate's
  `relations` (names compared ignoring case and spaces); for an entity claim (no relations), asserting an
  entity the candidate is `about`, with the summary the candidate states;
- an `episode` candidate: the cited events are the session's own (none derived), all of one session, and
  each entity the candidate is `about` is named by one of them;
- a `procedure` candidate: each cited event is a successful step (`command.completed` with exit code 0,
  `tool.call.completed` ok) whose program is in the title's sequence, or a success marker (a passed
  `verification.recorded`, `task.completed`, `session.ended`);
- a promotion: `candidate_event` is the created candidate of that id with the same `source_events`, and
  `review_event` is a review accepting that id;
- a causal edge: the event it was derived from is an `outcome.explained` of its `effect`, whose cause event
  the edge cites; and that (cause event, explained outcome) pair is a true link of the fixture;
- a `same_as` edge: the two names are entities of one type that the cited events assert (or are `about`);
- a `likely_implemented_decision` edge: a cited `task.completed` of the `source` task names, by seq and
  hash, a cited `decision.made` titled (or identified) `target`; any other inferred edge: both ends are
  named in the cited events.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from derived_fixture import Events, Fixture

from eventloom.citations import cited_events
from eventloom.event import Event
from eventloom.log import EventLog

CANDIDATE = "consolidation.candidate.created"
PROMOTED = "consolidation.candidate.promoted"
REVIEWED = "consolidation.candidate.reviewed"
DERIVED_PREFIXES = ("consolidation.", "inference.", "causal.")
SUCCESS_MARKERS = ("task.completed", "session.ended")
CANDIDATE_TYPES = frozenset({"consolidation_candidate", "episode", "claim", "procedure"})


def norm(text: object) -> str:
    return " ".join(str(text).split()).casefold()


@dataclass
class LogIndex:
    """Every event of the log, by (session, seq), in stream order."""

    events: dict[tuple[str, int], Event] = field(default_factory=dict)

    @classmethod
    async def read(cls, log: EventLog) -> LogIndex:
        index = cls()
        async for event in log.events():
            index.events[(event.session, event.seq)] = event
        return index

    @property
    def count(self) -> int:
        return len(self.events)

    @property
    def derived_count(self) -> int:
        return sum(1 for e in self.events.values() if e.actor.startswith("producer:"))

    def of_type(self, event_type: str) -> list[Event]:
        return [e for e in self.events.values() if e.type == event_type]

    def candidates(self) -> list[Event]:
        """Consolidation candidates (payload version 2: typed and cited)."""
        return [e for e in self.of_type(CANDIDATE) if "candidate_type" in e.payload]

    def candidates_by_type(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for event in self.candidates():
            kind = str(event.payload["candidate_type"])
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def causal_edges_from(self, explained: Event) -> list[Event]:
        return [
            e
            for e in self.of_type("causal.edge.generated")
            if e.payload.get("source_event_hash") == explained.hash
        ]

    def verdicts(self) -> dict[str, str]:
        """Candidate id -> the last review's decision."""
        return {str(e.payload["candidate_id"]): str(e.payload["decision"]) for e in self.of_type(REVIEWED)}

    def promoted(self) -> set[str]:
        retracted = {
            str(e.payload["candidate_id"]) for e in self.of_type("consolidation.promotion.retracted")
        }
        return {str(e.payload["candidate_id"]) for e in self.of_type(PROMOTED)} - retracted


def citation_fidelity(index: LogIndex, fixture: Fixture, events: dict[str, Events]) -> dict[str, Any]:
    """The fraction of candidates and derived edges whose citations exist and say what is claimed."""
    links = {(link.session, link.cause_key, link.explained_key) for link in fixture.truth.causal}
    keys = {event.hash: key for appended in events.values() for key, event in appended.items()}
    truth = {(session, cause, explained) for session, cause, explained in links}
    checked: list[tuple[str, Event]] = [(str(e.payload["candidate_type"]), e) for e in index.candidates()]
    checked += [("promotion", e) for e in index.of_type(PROMOTED)]
    checked += [("causal_edge", e) for e in index.of_type("causal.edge.generated")]
    checked += [
        (f"inferred:{e.payload.get('relation_type')}", e) for e in index.of_type("inference.edge.generated")
    ]
    by_kind: dict[str, dict[str, int]] = {}
    failures: list[dict[str, Any]] = []
    for kind, event in checked:
        problem = _citations_exist(index, event) or _says(kind, index, event, truth, keys)
        counts = by_kind.setdefault(kind, {"checked": 0, "faithful": 0})
        counts["checked"] += 1
        if problem is None:
            counts["faithful"] += 1
        else:
            failures.append({"kind": kind, "session": event.session, "seq": event.seq, "problem": problem})
    total = sum(c["checked"] for c in by_kind.values())
    faithful = sum(c["faithful"] for c in by_kind.values())
    return {
        "fraction": round(faithful / total, 4) if total else None,
        "checked": total,
        "by_kind": by_kind,
        "failures": failures,
    }


def _citations_exist(index: LogIndex, event: Event) -> str | None:
    cited = cited_events(event)
    if not cited:
        return "cites no event"
    for item in cited:
        found = index.events.get((item.session, item.seq))
        if found is None:
            return f"{item.field}: no event {item.session}/{item.seq}"
        if found.hash != item.hash:
            return f"{item.field}: {item.session}/{item.seq} has another hash"
    return None


def _cited(index: LogIndex, event: Event) -> list[Event]:
    return [index.events[(c.session, c.seq)] for c in cited_events(event)]


def _says(
    kind: str, index: LogIndex, event: Event, truth: set[tuple[str, str, str]], keys: dict[str, str]
) -> str | None:
    cited = _cited(index, event)
    payload = event.payload
    if kind == "claim":
        return _claim(payload, cited)
    if kind == "episode":
        return _episode(payload, cited)
    if kind == "procedure":
        return _procedure(payload, cited)
    if kind == "promotion":
        return _promotion(index, payload)
    if kind == "causal_edge":
        return _causal(index, event, truth, keys)
    if kind == "inferred:same_as":
        return _same_as(payload, cited)
    if kind == "inferred:likely_implemented_decision":
        return _implemented(payload, cited)
    named = norm(msgspec.json.encode([e.payload for e in cited]).decode())
    missing = [end for end in (payload.get("source"), payload.get("target")) if norm(end) not in named]
    return f"ends not named by the cited events: {missing}" if missing else None


def _relations(event: Event) -> set[tuple[str, str, str]]:
    return {
        (norm(r.get("source")), str(r.get("relation_type")), norm(r.get("target")))
        for r in event.payload.get("relations", [])
        if isinstance(r, dict)
    }


def _entities(event: Event) -> list[dict[str, Any]]:
    items = [*event.payload.get("entities", []), *event.payload.get("about", [])]
    return [item for item in items if isinstance(item, dict)]


def _claim(payload: dict[str, Any], cited: list[Event]) -> str | None:
    claimed = _relations_of(payload.get("relations", []))
    for event in cited:
        if event.type != "memory.fact.asserted":
            return f"cites a {event.type}, not an assertion"
        if claimed and not claimed & _relations(event):
            return f"{event.session}/{event.seq} does not assert {sorted(claimed)}"
        if not claimed:
            about = {(norm(a.get("name")), a.get("entity_type")) for a in payload.get("about", [])}
            stated = norm(f"{payload.get('title')} {payload.get('summary')}")
            if not any(
                (norm(e.get("name")), e.get("entity_type")) in about and norm(e.get("summary")) in stated
                for e in _entities(event)
            ):
                return f"{event.session}/{event.seq} does not assert the entity claimed"
    return None


def _relations_of(items: Iterable[Any]) -> set[tuple[str, str, str]]:
    return {
        (norm(r.get("source")), str(r.get("relation_type")), norm(r.get("target")))
        for r in items
        if isinstance(r, dict)
    }


def _episode(payload: dict[str, Any], cited: list[Event]) -> str | None:
    if len({e.session for e in cited}) != 1:
        return "cites events of several sessions"
    derived = [e for e in cited if e.type.startswith(DERIVED_PREFIXES)]
    if derived:
        return f"cites derived events ({derived[0].type})"
    named = {(norm(e.get("name")), e.get("entity_type")) for event in cited for e in _entities(event)}
    for subject in payload.get("about", []):
        if (norm(subject.get("name")), subject.get("entity_type")) not in named:
            return f"about {subject.get('name')!r}, named by none of its events"
    return None


def _procedure(payload: dict[str, Any], cited: list[Event]) -> str | None:
    title = norm(payload.get("title"))
    for event in cited:
        p = event.payload
        if event.type == "command.completed":
            program = str(p.get("command", "")).split()[:1]
            if p.get("exit_code") != 0 or not program or norm(program[0].rsplit("/", 1)[-1]) not in title:
                return f"{event.session}/{event.seq}: not a successful step of {title!r}"
        elif event.type == "tool.call.completed":
            if p.get("ok") is not True or norm(p.get("tool")) not in title:
                return f"{event.session}/{event.seq}: not a successful tool step of {title!r}"
        elif event.type == "verification.recorded":
            if p.get("passed") is not True:
                return f"{event.session}/{event.seq}: a failed verification"
        elif event.type not in SUCCESS_MARKERS:
            return f"{event.session}/{event.seq}: a {event.type} is neither a step nor a success"
    return None


def _promotion(index: LogIndex, payload: dict[str, Any]) -> str | None:
    ref, review = payload.get("candidate_event", {}), payload.get("review_event", {})
    created = index.events.get((str(ref.get("session")), int(ref.get("seq", 0))))
    if created is None or created.type != CANDIDATE:
        return "candidate_event is not a created candidate"
    if created.payload.get("candidate_id") != payload.get("candidate_id"):
        return "candidate_event proposed another candidate"
    if created.payload.get("source_events") != payload.get("source_events"):
        return "cites other sources than the candidate"
    reviewed = index.events.get((str(review.get("session")), int(review.get("seq", 0))))
    if reviewed is None or reviewed.type != REVIEWED or reviewed.payload.get("decision") != "accepted":
        return "review_event is not an acceptance"
    if reviewed.payload.get("candidate_id") != payload.get("candidate_id"):
        return "review_event accepted another candidate"
    return None


def _causal(
    index: LogIndex, edge: Event, truth: set[tuple[str, str, str]], keys: dict[str, str]
) -> str | None:
    p = edge.payload
    explained = index.events.get((edge.session, p.get("source_event_seq", 0)))
    if (
        explained is None
        or explained.hash != p.get("source_event_hash")
        or explained.type != "outcome.explained"
    ):
        return "not derived from a cited outcome.explained"
    if norm(explained.payload.get("outcome")) != norm(p.get("effect")):
        return "the effect is not the explained outcome"
    cause_seq = int(explained.payload.get("cause_event_seq") or 0)
    cause = index.events.get((edge.session, cause_seq))
    cited = {(c.session, c.seq, c.hash) for c in cited_events(edge)}
    if cause is None or (edge.session, cause.seq, cause.hash) not in cited:
        return "the explanation's cause event is not among the edge's citations"
    key = (edge.session, keys.get(cause.hash, ""), keys.get(explained.hash, ""))
    return None if key in truth else f"{cause.type} -> outcome is not a true link of the fixture"


def _same_as(payload: dict[str, Any], cited: list[Event]) -> str | None:
    named = {(norm(e.get("name")), e.get("entity_type")) for event in cited for e in _entities(event)}
    types = {kind for name, kind in named}
    for end in (payload.get("source"), payload.get("target")):
        if not any((norm(end), kind) in named for kind in types):
            return f"{end!r} is not an entity the cited events assert"
    if not any(
        (norm(payload.get("source")), k) in named and (norm(payload.get("target")), k) in named for k in types
    ):
        return "the two names are not of one type"
    return None


def _implemented(payload: dict[str, Any], cited: list[Event]) -> str | None:
    tasks = [
        e for e in cited if e.type == "task.completed" and e.payload.get("task_id") == payload.get("source")
    ]
    for task in tasks:
        decisions = [
            e
            for e in cited
            if e.type == "decision.made"
            and e.seq == task.payload.get("decision_event_seq")
            and e.hash == task.payload.get("decision_event_hash")
        ]
        target = norm(payload.get("target"))
        if any(
            target in {norm(d.payload.get("title")), norm(d.payload.get("decision_id"))} for d in decisions
        ):
            return None
    return "no cited task names a cited decision of that title"
