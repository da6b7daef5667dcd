"""`eventloom claims ...`: observations, claims and their questions from the command line (entry point
`eventloom.cli`).

`observe` records what was seen (never a claim); `claim`, `resolve` and `accept` need the agent or
reviewer they come from, and refuse a basis that is not in the log before anything is appended. The reads
ask the node that runs the `claims` projector. Every command prints JSON with `--json`, otherwise one
readable block per row with the `eventloom://` citation of the event that wrote it. Exit codes: 0 done or
found, 1 not found or no node answers, 2 invalid input, 3 no node running.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, fail, print_json, run, settings_of
from gateway.packs.claims import cli_render as show
from gateway.packs.claims.model import event_key
from readmodels.retrieval.model import QueryError

if TYPE_CHECKING:  # the log and the client are imported when a command runs (`eventloom --help` stays fast)
    from gateway.packs.claims.client import ClaimsClient

T = TypeVar("T")
claims_app = typer.Typer(
    help="Observations (what was seen) and claims (what an agent concluded from them, with a confidence "
    "and a basis): record them, settle contradictions with a resolution, accept a claim, and ask what is "
    "claimed about an entity, what a claim rests on, which claims contradict each other. Answered by the "
    "node that runs the `claims` projector.",
    no_args_is_help=True,
)
JsonOption = Annotated[bool, typer.Option("--json", help="Print the answer as JSON")]
LimitOption = Annotated[int, typer.Option("--limit", help="Most rows to show (1-1000)")]
SessionOption = Annotated[str, typer.Option("--session", help="The session the event goes in")]
EntityArgument = Annotated[str, typer.Argument(help="The entity, by name (any spelling of it)")]
ClaimArgument = Annotated[str, typer.Argument(help="The claim: its key <session>/<seq> or its citation")]
Cited = Annotated[
    list[str],
    typer.Option(help="A cited event: eventloom://<session>/events/<seq>#<hash> or <session>/<seq>; repeat"),
]
Confidence = Annotated[float, typer.Option("--confidence", min=0.0, max=1.0, help="How sure, 0 to 1")]
Agent = Annotated[str, typer.Option("--agent", help="The agent that concludes it (claims come from agents)")]
Negated = Annotated[bool, typer.Option("--negated", help="The claim is that it does NOT hold")]
Statement = Annotated[str | None, typer.Option("--statement", help="The claim in the agent's words")]


def register(app: typer.Typer) -> None:
    """Entry point `eventloom.cli`: add `eventloom claims`."""
    app.add_typer(claims_app, name="claims")


async def _using(settings: Settings, use: Callable[[ClaimsClient], Awaitable[T]]) -> T:
    from eventloom.log import EventLog  # noqa: PLC0415
    from gateway.packs.claims.client import ClaimsClient  # noqa: PLC0415
    from gateway.packs.claims.llm_extract import OpenAICompatibleTriples  # noqa: PLC0415
    from readmodels.query.protocol import MemoryUnavailableError  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        try:
            return await use(ClaimsClient(log, extractor=OpenAICompatibleTriples.from_settings(settings)))
        except QueryError as exc:
            fail(f"invalid input: {exc}", EXIT_INVALID)
        except MemoryUnavailableError as exc:
            fail(str(exc), EXIT_FAILED)


def _with(ctx: typer.Context, use: Callable[[ClaimsClient], Awaitable[T]]) -> T:
    return run(_using(settings_of(ctx), use))


def _json_or(as_json: bool, value: Any, missing: str) -> bool:
    """Print `value` as JSON when asked (exiting 1 if it is None); True when that was all to do."""
    if as_json:
        print_json(value)
        if value is None:
            raise typer.Exit(EXIT_FAILED)
        return True
    if value is None:
        fail(missing)
    return False


def _recorded(citation: str, what: str, as_json: bool) -> None:
    from gateway.packs.claims.citing import parse_ref  # noqa: PLC0415 (it imports the log)

    session, seq, _ = parse_ref("citation", citation)
    if as_json:
        print_json({"citation": citation, "key": event_key(session, seq), "session": session, "seq": seq})
    else:
        print(citation)
        show.note(f"{what} {event_key(session, seq)} recorded")


@claims_app.command("observe", help="Record what was seen (CONTENT, or - for stdin). Never a claim.")
def observe(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The text as seen; - reads it from stdin")],
    source: Annotated[str, typer.Option("--source", help="Where it was seen (a chat, a file, a URL)")],
    session: SessionOption,
    observed_at: Annotated[
        str | None, typer.Option("--observed-at", help="When it was seen, RFC 3339 (default: now)")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    text = sys.stdin.read() if content == "-" else content
    cited = _with(ctx, lambda c: c.observe(text, source=source, session=session, observed_at=observed_at))
    _recorded(cited, "observation", as_json)


@claims_app.command(
    "claim",
    help="An agent's claim SUBJECT PREDICATE OBJECT (the predicate in words, 'lives in', or LIVES_IN) with "
    "a confidence, resting on --basis events (observations or claims, checked against the log).",
)
def claim(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The entity the claim is about")],
    predicate: Annotated[str, typer.Argument(help="The relation: 'lives in' or LIVES_IN")],
    object: Annotated[str, typer.Argument(help="What it relates the subject to")],
    confidence: Confidence,
    basis: Cited,
    agent: Agent,
    session: SessionOption,
    negated: Negated = False,
    statement: Statement = None,
    as_json: JsonOption = False,
) -> None:
    cited = _with(
        ctx,
        lambda c: c.claim(
            subject,
            predicate,
            object,
            confidence=confidence,
            basis=basis,
            agent=agent,
            session=session,
            negated=negated,
            statement=statement,
        ),
    )
    _recorded(cited, "claim", as_json)


@claims_app.command(
    "resolve",
    help="A resolution: a claim (as `claim` takes it) that settles the claims it --supersedes.",
)
def resolve(
    ctx: typer.Context,
    subject: Annotated[str, typer.Argument(help="The entity the claim is about")],
    predicate: Annotated[str, typer.Argument(help="The relation: 'lives in' or LIVES_IN")],
    object: Annotated[str, typer.Argument(help="What it relates the subject to")],
    confidence: Confidence,
    basis: Cited,
    supersedes: Cited,
    agent: Agent,
    session: SessionOption,
    negated: Negated = False,
    statement: Statement = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Why it settles them")] = None,
    as_json: JsonOption = False,
) -> None:
    cited = _with(
        ctx,
        lambda c: c.resolve(
            subject,
            predicate,
            object,
            confidence=confidence,
            basis=basis,
            supersedes=supersedes,
            agent=agent,
            session=session,
            negated=negated,
            statement=statement,
            reason=reason,
        ),
    )
    _recorded(cited, "resolution", as_json)


@claims_app.command("accept", help="A reviewer accepts CLAIM: it materialises its derived edge.")
def accept(
    ctx: typer.Context,
    claim: ClaimArgument,
    reviewer: Annotated[str, typer.Option("--reviewer", help="Who accepts it")],
    session: SessionOption,
    reason: Annotated[str | None, typer.Option("--reason", help="Why")] = None,
    as_json: JsonOption = False,
) -> None:
    cited = _with(ctx, lambda c: c.accept(claim, reviewer, session=session, reason=reason))
    _recorded(cited, "acceptance", as_json)


@claims_app.command(
    "about", help="Claims about an entity: highest confidence first, then newest; without superseded ones."
)
def about(
    ctx: typer.Context,
    entity: EntityArgument,
    include_superseded: Annotated[
        bool, typer.Option("--include-superseded", help="Also the claims a resolution settled")
    ] = False,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    found = _with(ctx, lambda c: c.about(entity, include_superseded=include_superseded, limit=limit))
    if not _json_or(as_json, found, ""):
        show.print_claims(found, entity)


@claims_app.command("basis", help="What a claim rests on: the chain of claims down to observations.")
def basis(ctx: typer.Context, claim: ClaimArgument, as_json: JsonOption = False) -> None:
    found = _with(ctx, lambda c: c.basis(claim))
    if not _json_or(as_json, found, f"no claim {claim!r}"):
        assert found is not None
        show.print_basis(found)


@claims_app.command(
    "contradictions", help="Open contradictions (neither claim superseded), highest trust first."
)
def contradictions(
    ctx: typer.Context,
    entity: Annotated[str | None, typer.Option("--entity", help="Only claims about this entity")] = None,
    limit: LimitOption = 100,
    as_json: JsonOption = False,
) -> None:
    found = _with(ctx, lambda c: c.contradictions(entity, limit=limit))
    if not _json_or(as_json, found, ""):
        show.print_contradictions(found)


@claims_app.command(
    "entity", help="An entity and its relations: stated by observations, or derived from accepted claims."
)
def entity(ctx: typer.Context, name: EntityArgument, as_json: JsonOption = False) -> None:
    found = _with(ctx, lambda c: c.entity(name))
    if not _json_or(as_json, found, f"no entity {name!r}"):
        assert found is not None
        show.print_entity(found)


@claims_app.command("observations", help="Observations that mention an entity, newest first.")
def observations(
    ctx: typer.Context, entity: EntityArgument, limit: LimitOption = 100, as_json: JsonOption = False
) -> None:
    found = _with(ctx, lambda c: c.observations(entity, limit=limit))
    if not _json_or(as_json, found, ""):
        show.print_observations(found, entity)
