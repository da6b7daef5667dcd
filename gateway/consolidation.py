"""Proposing, reviewing and retracting consolidation: the one implementation the CLI and MCP tools call.

- `propose` appends a `consolidation.candidate.created` (payload version 2) after checking that every
  source event it cites exists in the log with that hash.
- `review` appends a `consolidation.candidate.reviewed` naming the event that proposed the candidate; an
  `accepted` verdict also appends the `consolidation.candidate.promoted` that makes it memory (its content
  and citations, read back from the proposing event itself, not from a read model). The id may instead name
  a proposed `same_as` edge (`inference.edge.generated` with an `edge_id`): `accepted` re-asserts the edge,
  identical but `review_status` `accepted`; `rejected` retracts it (`inference.edge.retracted`).
- `retract` appends a `consolidation.promotion.retracted` for a promoted candidate.

Every event goes to the session of the candidate (or edge), where its graph entity lives, with an
idempotency key derived from the candidate's state, so a repeated call appends nothing new. Who may review
is the caller's business (the MCP server checks review rights); `reviewer` is recorded as given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.schemas.catalogue import ConsolidationCandidateCreated
from eventloom.schemas.registry import current_payload
from readmodels.query.protocol import MemoryService
from readmodels.retrieval.candidates import Candidate, CandidateRequest
from readmodels.retrieval.model import Citation

VERDICTS: Final = ("accepted", "rejected", "deferred", "conflicted")
REVIEW_EVENT_TYPES: Final = frozenset(
    {
        "consolidation.candidate.reviewed",
        "consolidation.candidate.promoted",
        "consolidation.promotion.retracted",
    }
)
PROMOTED_FIELDS: Final = ("candidate_id", "candidate_type", "title", "summary", "source_events", "about")


def needs_review_rights(event_type: str, payload: Any) -> bool:
    """Whether appending this event is a reviewer's act: a verdict, a promotion, its retraction, or an
    inferred edge asserted as `accepted`."""
    if event_type in REVIEW_EVENT_TYPES:
        return True
    return (
        event_type == "inference.edge.generated"
        and isinstance(payload, dict)
        and payload.get("review_status") == "accepted"
    )


class Outcome(msgspec.Struct, frozen=True, kw_only=True):
    """What a review, a retraction or a proposal appended (oldest first)."""

    candidate_id: str
    session: str
    kind: str
    action: str
    events: list[dict[str, Any]]


def event_ref(event: Event) -> dict[str, Any]:
    return {
        "citation": event.citation,
        "session": event.session,
        "seq": event.seq,
        "hash": event.hash,
        "ts": event.ts,
        "type": event.type,
    }


def _source(cited: Citation) -> dict[str, Any]:
    return {"session": cited.session, "seq": cited.seq, "hash": cited.hash}


def proposed_candidate_id(title: str, sources: Sequence[dict[str, Any]]) -> str:
    """The id of a candidate a person or an agent proposes without one: from its title and citations."""
    cited = ",".join(f"{s['session']}:{s['seq']}:{s['hash']}" for s in sources)
    return "cand-" + hashlib.sha256(f"{title}\x1f{cited}".encode()).hexdigest()[:16]


def _key(*parts: object) -> str:
    """An idempotency key: readable prefix, then a digest of everything that makes the act the same."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:32]
    return f"{parts[0]}:{digest}"


async def _cited_event(log: EventLog, field: str, session: str, seq: int, event_hash: str) -> Event:
    stored = await log.event(session, seq)
    if stored is None:
        raise EventValidationError(field, f"session {session} has no event {seq}")
    if stored.event.hash != event_hash:
        found = stored.event.hash
        raise EventValidationError(
            field, f"event {seq} of session {session} does not match the cited hash (its hash: {found})"
        )
    return stored.event


async def propose(
    log: EventLog, session: str, payload: dict[str, Any], *, actor: str, principal: str | None
) -> Outcome:
    """Append a cited candidate to `session` once every source event it names is found in the log."""
    try:
        candidate = msgspec.convert(payload, ConsolidationCandidateCreated, strict=True)
    except msgspec.ValidationError as exc:
        raise EventValidationError("candidate", str(exc)) from None
    for index, source in enumerate(candidate.source_events):
        await _cited_event(log, f"source_events[{index}]", source.session, source.seq, source.hash)
    event = await log.append(
        session,
        "consolidation.candidate.created",
        actor,
        payload,
        caused_by=sorted({s.hash for s in candidate.source_events}),
        idempotency_key=_key("candidate", candidate.candidate_id, msgspec.json.encode(payload)),
        principal=principal,
    )
    return Outcome(
        candidate_id=candidate.candidate_id,
        session=session,
        kind="candidate",
        action="proposed",
        events=[event_ref(event)],
    )


async def find(memory: MemoryService, candidate_id: str, session: str | None) -> Candidate:
    lookup = await memory.candidate(CandidateRequest(candidate_id=candidate_id, session=session))
    if lookup.found is None:
        where = f" in session {session}" if session else ""
        raise EventValidationError(
            "candidate_id",
            f"no consolidation candidate or proposed same_as edge {candidate_id!r}{where} (a new one is "
            "found once the graph projector has caught up; `eventloom memory consolidation list`)",
        )
    return lookup.found


@dataclass(frozen=True)
class _Act:
    """Who appends a review's events, and where: the same for every event one review appends."""

    log: EventLog
    session: str
    actor: str
    principal: str | None

    async def append(self, event_type: str, payload: dict[str, Any], cause: str, key: str) -> Event:
        return await self.log.append(
            self.session,
            event_type,
            self.actor,
            payload,
            caused_by=[cause],
            idempotency_key=key,
            principal=self.principal,
        )


async def review(
    log: EventLog,
    memory: MemoryService,
    candidate_id: str,
    *,
    decision: str,
    rationale: str,
    reviewer: str,
    actor: str,
    principal: str | None,
    session: str | None = None,
    conflicts_with: Sequence[str] = (),
) -> Outcome:
    """Review the candidate (or proposed `same_as` edge) `candidate_id`; promote it when `accepted`."""
    if decision not in VERDICTS:
        raise EventValidationError("decision", f"expected one of {', '.join(VERDICTS)}, got {decision!r}")
    if not rationale.strip():
        raise EventValidationError("rationale", "required: say why")
    found = await find(memory, candidate_id, session)
    act = _Act(log, found.session, actor, principal)
    verdict = {
        "candidate_id": candidate_id,
        "decision": decision,
        "reviewer": reviewer,
        "rationale": rationale,
    }
    if found.kind == "same_as":
        return await _review_edge(act, found, verdict)
    _check_reviewable(found)
    cited = found.candidate_event
    proposing = await _cited_event(log, "candidate_event", cited.session, cited.seq, cited.hash)
    created = current_payload(proposing)
    if not isinstance(created, ConsolidationCandidateCreated):
        raise EventValidationError("candidate_id", f"{candidate_id!r} was not proposed with cited sources")
    payload: dict[str, Any] = verdict | {"candidate_event": _source(cited)}
    if conflicts_with:
        payload["conflicts_with"] = list(conflicts_with)
    key = _key("review", candidate_id, len(found.history), decision, reviewer, rationale)
    reviewed = await act.append("consolidation.candidate.reviewed", payload, proposing.hash, key)
    events = [reviewed]
    if decision == "accepted":
        promoted = _promotion(created, cited, reviewed, reviewer)
        key = _key("promote", candidate_id, reviewed.hash)
        events.append(await act.append("consolidation.candidate.promoted", promoted, reviewed.hash, key))
    return Outcome(
        candidate_id=candidate_id,
        session=found.session,
        kind="candidate",
        action="promoted" if decision == "accepted" else decision,
        events=[event_ref(e) for e in events],
    )


def _check_reviewable(found: Candidate) -> None:
    if found.status == "legacy_uncited":
        raise EventValidationError(
            "candidate_id",
            f"{found.candidate_id!r} is a legacy (version 1) candidate that cites no events; it cannot be "
            "reviewed or promoted (propose a cited one instead)",
        )
    if found.status == "promoted":
        raise EventValidationError(
            "candidate_id", f"{found.candidate_id!r} is already promoted; retract the promotion first"
        )


def _promotion(
    created: ConsolidationCandidateCreated, cited: Citation, reviewed: Event, reviewer: str
) -> dict[str, Any]:
    """The promotion's payload: the candidate's own content and citations, the two events it rests on."""
    content = msgspec.to_builtins(created)
    promoted = {name: content[name] for name in PROMOTED_FIELDS if content.get(name)}
    if created.relations:
        promoted["relations"] = content["relations"]
    return promoted | {
        "candidate_event": _source(cited),
        "review_event": {"session": reviewed.session, "seq": reviewed.seq, "hash": reviewed.hash},
        "promoted_by": reviewer,
    }


async def _review_edge(act: _Act, found: Candidate, verdict: dict[str, Any]) -> Outcome:
    """A verdict on a proposed `same_as` edge: accepted re-asserts it as accepted, rejected retracts it."""
    edge_id, decision = found.candidate_id, verdict["decision"]
    if found.status != "proposed":
        raise EventValidationError(
            "candidate_id", f"same_as edge {edge_id!r} is {found.status}, not proposed"
        )
    cited = found.candidate_event
    generating = await _cited_event(act.log, "candidate_event", cited.session, cited.seq, cited.hash)
    key = _key("review", edge_id, cited.hash, decision, verdict["reviewer"], verdict["rationale"])
    payload = verdict | {"candidate_event": _source(cited)}
    reviewed = await act.append("consolidation.candidate.reviewed", payload, generating.hash, key)
    events = [reviewed]
    follow: tuple[str, dict[str, Any]] | None = None
    if decision == "accepted":
        follow = ("inference.edge.generated", {**generating.payload, "review_status": "accepted"})
    elif decision == "rejected":
        reason = verdict["rationale"]
        follow = (
            "inference.edge.retracted",
            {"edge_id": edge_id, "reason": reason, "retracted_by_event_hash": reviewed.hash},
        )
    if follow is not None:
        event_type, body = follow
        key = _key("same_as", edge_id, event_type, reviewed.hash)
        events.append(await act.append(event_type, body, reviewed.hash, key))
    action = {"accepted": "accepted", "rejected": "retracted"}.get(decision, decision)
    return Outcome(
        candidate_id=edge_id,
        session=found.session,
        kind="same_as",
        action=action,
        events=[event_ref(e) for e in events],
    )


async def retract(
    log: EventLog,
    memory: MemoryService,
    candidate_id: str,
    *,
    reason: str,
    retracted_by: str,
    actor: str,
    principal: str | None,
    session: str | None = None,
) -> Outcome:
    """Undo the promotion of `candidate_id`: the memory stops holding; what it consolidated stands alone."""
    if not reason.strip():
        raise EventValidationError("reason", "required: say why")
    found = await find(memory, candidate_id, session)
    if found.kind != "candidate" or found.status != "promoted":
        raise EventValidationError(
            "candidate_id", f"{candidate_id!r} is not a promoted candidate (it is {found.status})"
        )
    event = await log.append(
        found.session,
        "consolidation.promotion.retracted",
        actor,
        {"candidate_id": candidate_id, "reason": reason, "retracted_by": retracted_by},
        idempotency_key=_key("retract", candidate_id, len(found.history)),
        principal=principal,
    )
    return Outcome(
        candidate_id=candidate_id,
        session=found.session,
        kind="candidate",
        action="retracted",
        events=[event_ref(event)],
    )
