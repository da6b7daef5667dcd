"""Consolidation candidates as the graph knows them: a list (by status, type, session) and one in full.

Graph extraction (`projectors.graph.extractors.consolidation`) keeps each candidate as an entity of type
`consolidation_candidate` named by its id, whose properties carry its status and content; each review,
promotion and retraction is a new version of it, so the versions are its review history. A proposed
`same_as` edge (`inference.edge.generated`, named by its `edge_id`) is reviewed like a candidate, so `show`
finds one when no candidate has the id. Like `readmodels.retrieval.causal_chains`, these are
backend-neutral `Reading`s, run with `GraphStore.read`.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, Consistency
from readmodels.graph.cypher.io import Reading
from readmodels.graph.reads import ENTITY_COLUMNS, to_version
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.model import MAX_LIMIT, Citation, QueryError, check_after_wait, check_range

CANDIDATE_TYPE: Final = "consolidation_candidate"
CANDIDATE_TYPES: Final = ("episode", "claim", "procedure")
STATUSES: Final = (
    "pending",
    "accepted",
    "rejected",
    "deferred",
    "conflicted",
    "promoted",
    "retracted",
    "legacy_uncited",
)
DEFAULT_CANDIDATE_LIMIT: Final = 20
MAX_SCANNED: Final = 20_000
"""A list reads at most this many current candidates (then says `truncated`)."""
SAME_AS: Final = "same_as"


def _check_session(session: str | None) -> None:
    if session is not None and not SESSION_PATTERN.fullmatch(session):
        raise QueryError(f"session: expected 1 to 128 of A-Z, a-z, 0-9, '_' and '-', got {session!r}")


class CandidateListRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Candidates of `session` (None: every session), optionally of one `status` and `candidate_type`."""

    session: str | None = None
    status: str | None = None
    candidate_type: str | None = None
    limit: int = DEFAULT_CANDIDATE_LIMIT

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        _check_session(self.session)
        if self.status is not None and self.status not in STATUSES:
            raise QueryError(f"status: expected one of {', '.join(STATUSES)}, got {self.status!r}")
        if self.candidate_type is not None and self.candidate_type not in CANDIDATE_TYPES:
            raise QueryError(
                f"candidate_type: expected one of {', '.join(CANDIDATE_TYPES)}, got {self.candidate_type!r}"
            )
        check_range("limit", self.limit, 1, MAX_LIMIT)


class CandidateRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One candidate (or proposed `same_as` edge) by id; `session` when the id is used in several."""

    candidate_id: str
    session: str | None = None

    after: Position | None = None
    """Answer only once the read models used have applied this event (read your own writes)."""
    after_wait_ms: int = DEFAULT_AFTER_WAIT_MS
    """How long to wait for `after` before answering anyway (the result's `consistency` says what lagged)."""

    def __post_init__(self) -> None:
        check_after_wait(self.after_wait_ms)
        if not self.candidate_id.strip() or len(self.candidate_id) > 256:
            raise QueryError("candidate_id: expected 1 to 256 characters")
        _check_session(self.session)


class Subject(msgspec.Struct, frozen=True):
    name: str
    entity_type: str


class ReviewStep(msgspec.Struct, frozen=True, kw_only=True):
    """One step of a candidate's life: proposed, reviewed (with the verdict), promoted or retracted."""

    status: str
    at: str
    event_type: str
    by: str | None
    rationale: str | None
    citation: Citation


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """A candidate as it stands; `kind` `same_as` for a proposed `same_as` edge reviewed like one."""

    kind: Literal["candidate", "same_as"]
    candidate_id: str
    session: str
    status: str
    candidate_type: str | None
    title: str
    summary: str
    confidence: float | None
    method: str | None
    purpose: str | None
    summary_by: str | None
    proposed_at: str
    candidate_event: Citation
    """The event that proposed it (a review names it as `candidate_event`)."""
    citations: list[Citation]
    """The events it rests on (`source_events`; for a `same_as` edge, its evidence)."""
    about: list[Subject]
    properties: dict[str, Any]
    history: list[ReviewStep] = msgspec.field(default_factory=list)
    """Oldest first; filled by `show`, empty in a list."""
    promotable: bool = False
    """Reviewing it `accepted` would promote it (a cited candidate, not promoted now)."""


class CandidateList(msgspec.Struct, frozen=True, kw_only=True):
    request: CandidateListRequest
    candidates: list[Candidate]
    """Newest proposal first."""
    matched: int
    truncated: bool
    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""


class CandidateLookup(msgspec.Struct, frozen=True, kw_only=True):
    request: CandidateRequest
    found: Candidate | None
    sessions: list[str] = msgspec.field(default_factory=list)
    """Every session that has a candidate of this id."""
    consistency: Consistency | None = None
    """Set when the request gave `after`: how long the read waited, and what read models still lagged."""


def _source_citations(items: Any) -> list[Citation]:
    cited: list[Citation] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and {"session", "seq", "hash"} <= item.keys():
            cited.append(event_citation(str(item["session"]), int(item["seq"]), str(item["hash"])))
    return cited


def _first(versions: list[EntityVersion]) -> Citation:
    own = versions[-1].properties.get("candidate_event")
    found = _source_citations([own])
    if found:
        return found[0]
    first = versions[0]
    return event_citation(first.session, first.source_event_seq, first.source_event_hash)


def to_candidate(versions: list[EntityVersion], *, with_history: bool) -> Candidate:
    """The candidate whose versions (oldest first) are `versions`."""
    latest = versions[-1]
    props = latest.properties
    status = str(props.get("status", "pending"))
    citations = _source_citations(props.get("source_events"))
    about = [
        Subject(str(a["name"]), str(a["entity_type"]))
        for a in props.get("about") or []
        if isinstance(a, dict) and "name" in a and "entity_type" in a
    ]
    confidence = props.get("confidence")
    return Candidate(
        kind="candidate",
        candidate_id=latest.name,
        session=latest.session,
        status=status,
        candidate_type=props.get("candidate_type"),
        title=str(props.get("title") or latest.summary or latest.name),
        summary=latest.summary or "",
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        method=props.get("method"),
        purpose=props.get("purpose"),
        summary_by=props.get("summary_by"),
        proposed_at=str(props.get("proposed_at") or versions[0].valid_from),
        candidate_event=_first(versions),
        citations=citations,
        about=about,
        properties=props,
        history=[_step(v) for v in versions] if with_history else [],
        promotable=bool(citations) and status not in ("promoted", "legacy_uncited"),
    )


def _step(version: EntityVersion) -> ReviewStep:
    props = version.properties
    status = str(props.get("status", "pending"))
    by = {"promoted": "promoted_by", "retracted": "retracted_by"}.get(status, "reviewer")
    reviewed = version.source_event_type == "consolidation.candidate.reviewed"
    return ReviewStep(
        status=status,
        at=version.valid_from,
        event_type=version.source_event_type,
        by=props.get(by) if by != "reviewer" or reviewed else None,
        rationale=props.get("rationale") if reviewed else None,
        citation=event_citation(version.session, version.source_event_seq, version.source_event_hash),
    )


def candidate_list(request: CandidateListRequest) -> Reading[CandidateList]:
    """The current candidates that match `request`, newest proposal first, at most `limit`."""
    params: dict[str, Any] = {"entity_type": CANDIDATE_TYPE, "cap": MAX_SCANNED + 1}
    conditions = ["e.entity_type = $entity_type", "e.valid_to IS NULL"]
    if request.session is not None:
        params["session"] = request.session
        conditions.append("e.session = $session")
    rows = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN {ENTITY_COLUMNS} LIMIT $cap",
        params,
    )
    truncated = len(rows) > MAX_SCANNED
    found = [to_candidate([to_version(row)], with_history=False) for row in rows[:MAX_SCANNED]]
    matching = [
        c
        for c in found
        if (request.status is None or c.status == request.status)
        and (request.candidate_type is None or c.candidate_type == request.candidate_type)
    ]
    matching.sort(key=lambda c: (c.proposed_at, c.session, c.candidate_id), reverse=True)
    return CandidateList(
        request=request, candidates=matching[: request.limit], matched=len(matching), truncated=truncated
    )


def candidate_show(request: CandidateRequest) -> Reading[CandidateLookup]:
    """The candidate `request` names with its review history; else the proposed `same_as` edge of that
    `edge_id`; `found` None when neither exists. Raises `QueryError` when the id is a candidate of several
    sessions and `session` does not say which."""
    params: dict[str, Any] = {"entity_type": CANDIDATE_TYPE, "name": request.candidate_id}
    conditions = ["e.entity_type = $entity_type", "e.name = $name"]
    if request.session is not None:
        params["session"] = request.session
        conditions.append("e.session = $session")
    rows = yield (
        f"MATCH (e:Entity) WHERE {' AND '.join(conditions)} RETURN {ENTITY_COLUMNS} "
        "ORDER BY e.session, e.valid_from",
        params,
    )
    by_session: dict[str, list[EntityVersion]] = {}
    for row in rows:
        version = to_version(row)
        by_session.setdefault(version.session, []).append(version)
    sessions = sorted(by_session)
    if len(sessions) > 1:
        raise QueryError(
            f"session: candidate {request.candidate_id!r} is in several sessions ({', '.join(sessions)}); "
            "name one"
        )
    if sessions:
        found = to_candidate(by_session[sessions[0]], with_history=True)
        return CandidateLookup(request=request, found=found, sessions=sessions)
    edge = yield from _same_as(request)
    return CandidateLookup(request=request, found=edge, sessions=[edge.session] if edge else [])


def _same_as(request: CandidateRequest) -> Reading[Candidate | None]:
    params: dict[str, Any] = {"edge_id": request.candidate_id, "relation_type": SAME_AS}
    conditions = ["r.edge_id = $edge_id", "r.relation_type = $relation_type"]
    if request.session is not None:
        params["session"] = request.session
        conditions.append("r.session = $session")
    rows = yield (
        f"MATCH (a:EntityKey)-[r:RELATES]->(b:EntityKey) WHERE {' AND '.join(conditions)} "
        "RETURN r.session AS session, a.name AS a_name, a.entity_type AS a_type, b.name AS b_name, "
        "b.entity_type AS b_type, r.valid_from AS valid_from, r.valid_to AS valid_to, "
        "r.review_status AS review_status, r.confidence AS confidence, r.inference_method AS method, "
        "r.source_event_seq AS seq, r.source_event_hash AS hash, "
        "r.evidence_event_seqs AS evidence_seqs, r.evidence_event_hashes AS evidence_hashes "
        "ORDER BY r.valid_from DESC LIMIT 1",
        params,
    )
    if not rows:
        return None
    row = rows[0]
    status = "retracted" if row["valid_to"] is not None else str(row["review_status"] or "proposed")
    seqs, hashes = list(row["evidence_seqs"] or []), list(row["evidence_hashes"] or [])
    evidence = [event_citation(row["session"], s, h) for s, h in zip(seqs, hashes, strict=False)]
    title = f"{row['a_name']} same_as {row['b_name']}"
    return Candidate(
        kind="same_as",
        candidate_id=request.candidate_id,
        session=row["session"],
        status=status,
        candidate_type=None,
        title=title,
        summary=f"proposed: {title}",
        confidence=row["confidence"],
        method=row["method"],
        purpose=None,
        summary_by=None,
        proposed_at=row["valid_from"],
        candidate_event=event_citation(row["session"], row["seq"], row["hash"]),
        citations=evidence,
        about=[Subject(row["a_name"], row["a_type"]), Subject(row["b_name"], row["b_type"])],
        properties={},
        promotable=status == "proposed",
    )
