"""`eventloom memory ...`: what the memory read models know (here: the inferred-edge audit view)."""

from __future__ import annotations

from typing import Annotated

import typer

from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, fail, print_json, run, settings_of
from projectors.inferred.plugin import live_database
from readmodels.inferred.model import InferredStatus, Stats
from readmodels.inferred.sqlite_store import SqliteInferredStore

memory_app = typer.Typer(help="What the memory read models know.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")


@memory_app.command(
    "inferred-status",
    help="Inferred and causal edges: counts by kind, method and relation, confidence and trust statistics, "
    "evidence coverage, edges missing source-event provenance, retractions, and samples.",
)
def inferred_status(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Only this session")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
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
    database = live_database(settings.data_dir / "readmodels" / "inferred")
    if not database.exists():
        hint = "start the node (`eventloom up`) or `eventloom projector run inferred`"
        fail(f"no inferred-edge read model yet: {hint}", EXIT_FAILED)
    async with SqliteInferredStore(database, read_only=True) as store:  # the node keeps writing it
        return await store.status(session)
