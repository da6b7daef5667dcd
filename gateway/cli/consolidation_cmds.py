"""`eventloom memory consolidation ...`: list, show, propose, review and retract consolidation candidates.

Reads ask the node's query service; writes append through `gateway.consolidation` (as the MCP tools do) as
the OS user who runs the command, who is also the reviewer recorded unless `--reviewer` says otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from eventloom.event import os_principal
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, print_json, run, settings_of
from readmodels.retrieval.candidates import (
    CANDIDATE_TYPES,
    DEFAULT_CANDIDATE_LIMIT,
    STATUSES,
    Candidate,
    CandidateListRequest,
    CandidateRequest,
)
from readmodels.retrieval.model import QueryError

if TYPE_CHECKING:  # the log, the query client and the writes are imported when a command runs
    from eventloom.log import EventLog
    from gateway import consolidation
    from readmodels.query.client import MemoryClient

T = TypeVar("T")
consolidation_app = typer.Typer(
    help="Consolidation candidates: cited proposals to merge memory (episodes, claims, procedures). A "
    "candidate is never a fact; accepting it promotes it to authoritative memory that cites its sources.",
    no_args_is_help=True,
)
_SOURCE = re.compile(r"^([A-Za-z0-9_-]{1,128}):([1-9][0-9]*):([0-9a-f]{64})$")
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]
IdArgument = Annotated[str, typer.Argument(help="The candidate's id (or a proposed same_as edge's edge_id)")]
InSessionOption = Annotated[
    str | None, typer.Option("--session", help="The candidate's session, when the id is used in several")
]


def register(memory_app: typer.Typer) -> None:
    memory_app.add_typer(consolidation_app, name="consolidation")


def _user() -> str:
    return os_principal().removeprefix("os:")


async def _with(settings: Settings, work: Callable[[EventLog, MemoryClient], Awaitable[T]]) -> T:
    from eventloom.log import EventLog  # noqa: PLC0415
    from readmodels.query.client import MemoryClient  # noqa: PLC0415
    from readmodels.query.protocol import MemoryUnavailableError  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        try:
            return await work(log, MemoryClient(log.client))
        except QueryError as exc:
            fail(f"invalid input: {exc}", EXIT_INVALID)
        except MemoryUnavailableError as exc:
            fail(str(exc), EXIT_FAILED)


def _request(build: Callable[[], T]) -> T:
    try:
        return build()
    except QueryError as exc:
        fail(f"invalid input: {exc}", EXIT_INVALID)


@consolidation_app.command("list", help="Candidates, newest first, by status, type and session.")
def consolidation_list(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option("--session", help="Only this session")] = None,
    status: Annotated[
        str | None, typer.Option("--status", help=f"Only this status: {', '.join(STATUSES)}")
    ] = None,
    candidate_type: Annotated[
        str | None, typer.Option("--type", help=f"Only this type: {', '.join(CANDIDATE_TYPES)}")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", help="At most this many (1-100)")
    ] = DEFAULT_CANDIDATE_LIMIT,
    as_json: JsonOption = False,
) -> None:
    request = _request(
        lambda: CandidateListRequest(
            session=session, status=status, candidate_type=candidate_type, limit=limit
        )
    )
    found = run(_with(settings_of(ctx), lambda _, memory: memory.candidates(request)))
    if as_json:
        print_json(found)
        return
    for c in found.candidates:
        kind = c.candidate_type or c.kind
        print(f"{c.candidate_id}  [{c.status}]  {kind}  {c.session}  {c.proposed_at}  {c.title}")
    console.print(f"{len(found.candidates)} of {found.matched} candidate(s)", highlight=False)


@consolidation_app.command("show", help="One candidate: content, citations, status and review history.")
def consolidation_show(
    ctx: typer.Context, candidate_id: IdArgument, session: InSessionOption = None, as_json: JsonOption = False
) -> None:
    request = _request(lambda: CandidateRequest(candidate_id=candidate_id, session=session))
    lookup = run(_with(settings_of(ctx), lambda _, memory: memory.candidate(request)))
    if lookup.found is None:
        if as_json:
            print_json(lookup)
        fail(f"candidate_id: no candidate or proposed same_as edge {candidate_id!r}")
    if as_json:
        print_json(lookup.found)
        return
    _print_candidate(lookup.found)


def _print_candidate(c: Candidate) -> None:
    confidence = "-" if c.confidence is None else f"{c.confidence:.2f}"
    print(f"{c.candidate_id} ({c.kind}, {c.candidate_type or '-'}) in {c.session}: [{c.status}]")
    print(f"  title: {c.title}")
    print(f"  summary: {c.summary}")
    print(f"  confidence {confidence}  method {c.method or '-'}  purpose: {c.purpose or '-'}")
    print(f"  proposed by {c.candidate_event.uri} at {c.proposed_at}")
    for cited in c.citations:
        print(f"  cites {cited.uri}")
    for subject in c.about:
        print(f"  about {subject.name} ({subject.entity_type})")
    for step in c.history:
        why = f": {step.rationale}" if step.rationale else ""
        print(f"  {step.at}  {step.status}  by {step.by or '-'}{why}  ({step.citation.uri})")


def _print_outcome(outcome: consolidation.Outcome, as_json: bool) -> None:
    if as_json:
        print_json(outcome)
        return
    console.print(f"{outcome.candidate_id}: {outcome.action}", highlight=False)
    for event in outcome.events:
        print(f"  appended {event['type']}  {event['citation']}")


@consolidation_app.command(
    "review",
    help="Give a verdict (accepted, rejected, deferred, conflicted) with a rationale. accepted promotes the "
    "candidate to authoritative memory; on a same_as edge it accepts the edge, rejected retracts it.",
)
def consolidation_review(
    ctx: typer.Context,
    candidate_id: IdArgument,
    verdict: Annotated[str, typer.Option("--verdict", help="accepted, rejected, deferred or conflicted")],
    rationale: Annotated[str, typer.Option("--rationale", help="Why (required)")],
    session: InSessionOption = None,
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Who reviews (default: you)")] = None,
    conflicts_with: Annotated[
        list[str] | None, typer.Option("--conflicts-with", help="For conflicted: what it conflicts with")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    from gateway import consolidation  # noqa: PLC0415

    who = reviewer or _user()
    outcome = run(
        _with(
            settings_of(ctx),
            lambda log, memory: consolidation.review(
                log,
                memory,
                candidate_id,
                decision=verdict,
                rationale=rationale,
                reviewer=who,
                actor=f"cli:{who}",
                principal=os_principal(),
                session=session,
                conflicts_with=conflicts_with or (),
            ),
        )
    )
    _print_outcome(outcome, as_json)


@consolidation_app.command(
    "retract", help="Undo a promotion: the memory stops holding; its facts stand alone."
)
def consolidation_retract(
    ctx: typer.Context,
    candidate_id: IdArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why (required)")],
    session: InSessionOption = None,
    as_json: JsonOption = False,
) -> None:
    from gateway import consolidation  # noqa: PLC0415

    who = _user()
    outcome = run(
        _with(
            settings_of(ctx),
            lambda log, memory: consolidation.retract(
                log,
                memory,
                candidate_id,
                reason=reason,
                retracted_by=who,
                actor=f"cli:{who}",
                principal=os_principal(),
                session=session,
            ),
        )
    )
    _print_outcome(outcome, as_json)


@consolidation_app.command(
    "propose", help="Propose a cited candidate; every --source must exist in the log with that hash."
)
def consolidation_propose(
    ctx: typer.Context,
    session: Annotated[str, typer.Option("--session", help="The session to append it to")],
    candidate_type: Annotated[str, typer.Option("--type", help=f"One of {', '.join(CANDIDATE_TYPES)}")],
    title: Annotated[str, typer.Option("--title", help="The candidate in one line")],
    summary: Annotated[str, typer.Option("--summary", help="What it says")],
    source: Annotated[
        list[str], typer.Option("--source", help="A cited event as SESSION:SEQ:HASH (64 hex); repeatable")
    ],
    purpose: Annotated[str, typer.Option("--purpose", help="Why keeping it helps")],
    candidate_id: Annotated[
        str | None, typer.Option("--id", help="The candidate's id (default: derived from title and sources)")
    ] = None,
    confidence: Annotated[float, typer.Option("--confidence", help="0-1")] = 0.5,
    method: Annotated[str, typer.Option("--method", help="How it was found")] = "manual",
    about: Annotated[
        list[str] | None, typer.Option("--about", help="An entity it concerns, as NAME:TYPE; repeatable")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    from gateway import consolidation  # noqa: PLC0415

    payload = _proposal(
        candidate_id, candidate_type, title, summary, source, purpose, confidence, method, about
    )
    who = _user()
    outcome = run(
        _with(
            settings_of(ctx),
            lambda log, _: consolidation.propose(
                log, session, payload, actor=f"cli:{who}", principal=os_principal()
            ),
        )
    )
    _print_outcome(outcome, as_json)


def _proposal(
    candidate_id: str | None,
    candidate_type: str,
    title: str,
    summary: str,
    sources: list[str],
    purpose: str,
    confidence: float,
    method: str,
    about: list[str] | None,
) -> dict[str, Any]:
    from gateway import consolidation  # noqa: PLC0415

    cited = []
    for index, text in enumerate(sources):
        match = _SOURCE.fullmatch(text)
        if match is None:
            fail(f"invalid input: --source[{index}]: expected SESSION:SEQ:HASH, got {text!r}", EXIT_INVALID)
        cited.append({"session": match[1], "seq": int(match[2]), "hash": match[3]})
    subjects = []
    for index, text in enumerate(about or []):
        name, _, entity_type = text.rpartition(":")
        if not name or not entity_type:
            fail(f"invalid input: --about[{index}]: expected NAME:TYPE, got {text!r}", EXIT_INVALID)
        subjects.append({"name": name, "entity_type": entity_type})
    payload: dict[str, Any] = {
        "candidate_id": candidate_id or consolidation.proposed_candidate_id(title, cited),
        "candidate_type": candidate_type,
        "title": title,
        "summary": summary,
        "source_events": cited,
        "confidence": confidence,
        "method": method,
        "purpose": purpose,
        "about": subjects,
        "summary_by": "agent",  # whoever proposes wrote title and summary
    }
    if candidate_type not in CANDIDATE_TYPES:
        fail(f"invalid input: --type: expected one of {', '.join(CANDIDATE_TYPES)}", EXIT_INVALID)
    return payload
