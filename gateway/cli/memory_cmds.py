"""`eventloom memory ...`: ask memory (query, checkout, causal chains, answered by the node's query service
over NATS) and audit the inferred edges."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.markup import escape

from eventloom.errors import EventValidationError
from eventloom.position import Position
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, print_json, run, settings_of
from readmodels.checkout.model import DEFAULT_TOKEN_BUDGET, CheckoutRequest
from readmodels.consistency import Consistency
from readmodels.inferred.model import InferredStatus, Stats
from readmodels.retrieval.causal_chains import (
    DEFAULT_CAUSAL_DEPTH,
    DEFAULT_CAUSAL_LIMIT,
    CausalChain,
    CausalRequest,
    CausalStep,
    Direction,
)
from readmodels.retrieval.fusion import PROFILES
from readmodels.retrieval.model import DEFAULT_LIMIT, Query, QueryError

if TYPE_CHECKING:  # the log, the query client and the backends are imported when a command runs
    from readmodels.query.client import MemoryClient

T = TypeVar("T")
memory_app = typer.Typer(help="What the memory read models know.", no_args_is_help=True)
causal_app = typer.Typer(
    help="Causal chains over the graph: what an entity caused, or what caused it. Causal edges are proposed "
    "and non-authoritative; retracted ones are left out unless --as-of asks for a time they held.",
    no_args_is_help=True,
)
TextArgument = Annotated[str, typer.Argument(help="The question, in plain words (at most 4,096 characters)")]
SessionOption = Annotated[str | None, typer.Option("--session", help="Only this session")]
AsOfOption = Annotated[
    str | None, typer.Option("--as-of", help="What was true at this RFC 3339 time (default: now)")
]
ProfileOption = Annotated[
    str, typer.Option("--profile", help=f"Lane weights and fusion: {', '.join(PROFILES)}")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]
AfterOption = Annotated[
    str | None,
    typer.Option(
        "--after",
        help="SESSION/SEQ (what `eventloom append` prints as its position): answer once the read models "
        "have applied that event, waiting up to 2 s; past that, the answer says which ones lag",
    ),
]


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
    memory_app.add_typer(causal_app, name="causal")


@memory_app.command(
    "query",
    help="Hybrid, cited retrieval: exact names, BM25, vectors, graph traversal and verbatim sources, fused. "
    "Superseded and invalidated facts are left out unless --as-of asks for a time they held.",
)
def memory_query(
    ctx: typer.Context,
    text: TextArgument,
    session: SessionOption = None,
    as_of: AsOfOption = None,
    limit: Annotated[int, typer.Option("--limit", help="Hits to return (1-100)")] = DEFAULT_LIMIT,
    profile: ProfileOption = "balanced",
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    query = _valid(
        lambda: Query(
            text=text, session=session, as_of=as_of, limit=limit, profile=profile, after=after_position(after)
        )
    )
    result = run(_ask(settings_of(ctx), lambda memory: memory.query(query)))
    if as_json:
        print_json(result)
        return
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    for rank, hit in enumerate(result.hits, 1):
        window = f"{hit.valid_from} .. {hit.valid_to or 'now'}"
        lanes = ", ".join(f"{lane} {c.contribution:.4f}" for lane, c in hit.explanation.lanes.items())
        print(f"{rank:>2}. {hit.score:.4f}  {hit.kind} {hit.entity} ({hit.type})  [{window}]")
        if hit.summary:
            print(f"      {' '.join(hit.summary.split())[:200]}")
        print(f"      lanes: {lanes}")
        for cited in hit.citations:
            where = f"  {cited.path}:{cited.line_start}-{cited.line_end}" if cited.path else ""
            print(f"      cites {cited.uri}{where}")
    for gone in result.invalidated:
        print(f"no longer true: {gone.entity} ({gone.type}) since {gone.invalid_at}: {gone.statement}")
        print(f"      cites {gone.citation.uri}")
    excluded = result.excluded_not_current
    left_out = f"; {excluded} item(s) no longer holding left out" if excluded else ""
    console.print(f"{len(result.hits)} hit(s) in {result.ms:.1f} ms{left_out}", highlight=False)


@memory_app.command(
    "checkout",
    help="The prompt-ready Memory Checkout: current facts, verbatim snippets, inferred context marked "
    "non-authoritative, evidence, answerability and guidance, within a token budget.",
)
def memory_checkout(
    ctx: typer.Context,
    text: TextArgument,
    session: SessionOption = None,
    as_of: AsOfOption = None,
    limit: Annotated[int, typer.Option("--limit", help="Retrieval hits to consider (1-100)")] = 20,
    profile: ProfileOption = "balanced",
    budget: Annotated[
        int, typer.Option("--budget", help="Token budget of the prompt text (never exceeded)")
    ] = DEFAULT_TOKEN_BUDGET,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    request = _valid(
        lambda: CheckoutRequest(
            text=text,
            session=session,
            as_of=as_of,
            limit=limit,
            profile=profile,
            token_budget=budget,
            after=after_position(after),
        )
    )
    checkout = run(_ask(settings_of(ctx), lambda memory: memory.checkout(request)))
    if as_json:
        print_json(checkout)
        return
    print_lag(checkout.consistency)
    print(checkout.prompt)
    verdict = checkout.answerability
    console.print(
        f"answer from memory: {verdict.answer_from_memory}  refresh: {verdict.refresh_recommended}  "
        f"ask user: {verdict.ask_user}  ({checkout.diagnostics.tokens}/{budget} tokens)",
        highlight=False,
    )


def _valid(build: Callable[[], T]) -> T:
    try:
        return build()
    except (QueryError, EventValidationError) as exc:  # EventValidationError: a bad --after
        fail(f"invalid input: {exc}", EXIT_INVALID)


def after_position(text: str | None) -> Position | None:
    """`--after`, parsed by the one parser of the text form (its error names `after`)."""
    return None if text is None else Position.parse(text, "after")


def print_lag(consistency: Consistency | None) -> None:
    """The read models that had not applied `--after` when the answer was made (on stderr, like warnings)."""
    warning = consistency.warning() if consistency is not None else None
    if warning is not None:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)


async def _ask(settings: Settings, ask: Callable[[MemoryClient], Awaitable[T]]) -> T:
    from eventloom.log import EventLog  # noqa: PLC0415
    from readmodels.query.client import MemoryClient  # noqa: PLC0415
    from readmodels.query.protocol import MemoryUnavailableError  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        try:
            return await ask(MemoryClient(log.client))
        except QueryError as exc:
            fail(f"invalid input: {exc}", EXIT_INVALID)
        except MemoryUnavailableError as exc:
            fail(str(exc), EXIT_FAILED)


@memory_app.command(
    "inferred-status",
    help="Inferred and causal edges: counts by kind, method and relation, confidence and trust statistics, "
    "evidence coverage, edges missing source-event provenance, retractions, and samples.",
)
def inferred_status(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Only this session")] = None,
    as_json: JsonOption = False,
) -> None:
    status = run(_status(settings_of(ctx), session))
    if as_json:
        print_json(status)
        return
    scope = f"session {session}" if session else "all sessions"
    print(
        f"inferred edges ({scope}): {status.edges} ({status.current} current, {status.retracted} retracted)"
    )
    print(f"  by kind: {status.by_kind}  by method: {status.by_method}")
    print(f"  by relation: {status.by_relation}")
    print(f"  confidence: {_stats(status.confidence)}  trust (current): {_stats(status.trust)}")
    print(f"  evidence coverage: {status.evidence_coverage}  missing provenance: {status.missing_provenance}")
    for edge in status.samples:
        print(f"  {edge.trust:.2f}  {edge.source} -[{edge.relation_type}]-> {edge.target}  ({edge.method})")


def _stats(stats: Stats) -> str:
    if not stats.count:
        return "-"
    return f"min {stats.min} mean {stats.mean} median {stats.median} max {stats.max}"


async def _status(settings: Settings, session: str | None) -> InferredStatus:
    from projectors.backends import live_inferred_database  # noqa: PLC0415
    from readmodels.embedded.inferred_store import SqliteInferredStore  # noqa: PLC0415

    database = live_inferred_database(settings.data_dir / "readmodels" / "inferred")
    if database is None or not database.exists():
        hint = "start the node (`eventloom up`) or `eventloom projector run inferred`"
        fail(f"no inferred-edge read model yet: {hint}", EXIT_FAILED)
    async with SqliteInferredStore(database, read_only=True) as store:  # the node keeps writing it
        return await store.status(session)


NameArgument = Annotated[
    str, typer.Argument(help="The entity's name, or a part of it (case does not matter)")
]
CausalSessionOption = Annotated[str, typer.Option("--session", help="The session the entity is in")]
TypeOption = Annotated[
    str | None, typer.Option("--type", help="Start only from an entity of this type (e.g. cause, outcome)")
]
CausalDepthOption = Annotated[int, typer.Option("--depth", help="Hops to follow (1-5)")]
CausalLimitOption = Annotated[
    int, typer.Option("--limit", help="Edges per hop (1-100), most confident first")
]


@causal_app.command("successors", help="What the entity caused: causal edges out of it, hop by hop.")
def causal_successors(
    ctx: typer.Context,
    name: NameArgument,
    session: CausalSessionOption,
    entity_type: TypeOption = None,
    depth: CausalDepthOption = DEFAULT_CAUSAL_DEPTH,
    as_of: AsOfOption = None,
    limit: CausalLimitOption = DEFAULT_CAUSAL_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    _causal(ctx, "successors", name, session, entity_type, depth, as_of, limit, after, as_json)


@causal_app.command("predecessors", help="What caused the entity: causal edges into it, hop by hop.")
def causal_predecessors(
    ctx: typer.Context,
    name: NameArgument,
    session: CausalSessionOption,
    entity_type: TypeOption = None,
    depth: CausalDepthOption = DEFAULT_CAUSAL_DEPTH,
    as_of: AsOfOption = None,
    limit: CausalLimitOption = DEFAULT_CAUSAL_LIMIT,
    after: AfterOption = None,
    as_json: JsonOption = False,
) -> None:
    _causal(ctx, "predecessors", name, session, entity_type, depth, as_of, limit, after, as_json)


def _causal(
    ctx: typer.Context,
    direction: Direction,
    name: str,
    session: str,
    entity_type: str | None,
    depth: int,
    as_of: str | None,
    limit: int,
    after: str | None,
    as_json: bool,
) -> None:
    request = _valid(
        lambda: CausalRequest(
            session=session,
            name=name,
            direction=direction,
            entity_type=entity_type,
            depth=depth,
            as_of=as_of,
            limit=limit,
            after=after_position(after),
        )
    )
    chain = run(_ask(settings_of(ctx), lambda memory: memory.causal(request)))
    if as_json:
        print_json(chain)
        if not chain.start:
            raise typer.Exit(EXIT_FAILED)  # not found: the JSON says what is closest
        return
    print_lag(chain.consistency)
    _print_chain(chain)


def _print_chain(chain: CausalChain) -> None:
    """A tree: each step indented by its hop, the entity it reached first, then the edge's audit fields."""
    if not chain.start:
        hint = f"; did you mean: {', '.join(repr(s) for s in chain.suggestions)}" if chain.suggestions else ""
        fail(f"no entity named {escape(repr(chain.name))} in session {chain.session}{escape(hint)}")
    if chain.resolved_name is not None:
        console.print(f"{chain.name!r} matched {chain.resolved_name!r}", highlight=False)
    started = ", ".join(f"{entity.name} ({entity.entity_type})" for entity in chain.start)
    print(f"{chain.direction} of {started}, as of {chain.as_of or 'now'}")
    for step in chain.steps:
        reached = step.effect if chain.direction == "successors" else step.cause
        indent = "  " * step.depth
        summary = f": {reached.summary}" if reached.summary else ""
        print(f"{indent}{step.depth}. {reached.name} ({reached.entity_type}){summary}")
        print(f"{indent}   {_edge_line(step)}")
        for cited in step.citations:
            print(f"{indent}   cites {cited.uri}")
    more = "; more edges than --limit at some hop (the most confident shown)" if chain.truncated else ""
    console.print(f"{len(chain.steps)} causal step(s), not authoritative{more}", highlight=False)


def _edge_line(step: CausalStep) -> str:
    confidence = "-" if step.confidence is None else f"{step.confidence:.2f}"
    window = f"{step.valid_from} .. {step.valid_to or 'now'}"
    return (
        f"{step.cause.name} -{step.relation_type}-> {step.effect.name}  confidence {confidence}  "
        f"{step.review_status or '-'}/{step.authority_status or '-'}  [{window}]"
    )
