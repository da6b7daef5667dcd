"""`eventloom rebuild`, `eventloom graph query` and `eventloom schema-plan`."""

from __future__ import annotations

import json
from typing import Annotated, Any

import nats.errors
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, print_json, run, settings_of
from projectors.rebuild import RebuildReport, rebuild
from readmodels.graph.ladybug_schema import schema_plan
from readmodels.graph.protocol import GraphStoreError
from readmodels.graph.service import ask_cypher

graph_app = typer.Typer(help="The temporal memory graph read model.", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def register(app: typer.Typer) -> None:
    app.command(
        "rebuild", help="Rebuild a read model from stream sequence 1 into a new generation, then swap it in."
    )(rebuild_command)
    app.command(
        "schema-plan",
        help="Print the graph schema migrations (names, checksums, statements); no side effects.",
    )(schema_plan_command)
    app.add_typer(graph_app, name="graph")


def rebuild_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The projector, e.g. graph")],
    as_json: JsonOption = False,
) -> None:
    report = run(_rebuild(settings_of(ctx), name, show_progress=not as_json))
    if as_json:
        print_json(report)
    else:
        console.print(
            f"rebuilt {report.projector} into generation {report.generation}: {report.events} events in "
            f"{report.seconds:.2f}s ({report.events_per_s:,.0f} events/s); live from stream seq "
            f"{report.resume_stream_seq}"
        )


async def _rebuild(settings: Settings, name: str, *, show_progress: bool) -> RebuildReport:
    async with await EventLog.open(settings, persistent=False) as log:
        if not show_progress:
            return await rebuild(log, name)
        with Progress(
            TextColumn(f"rebuilding {name}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("rebuild", total=None)
            return await rebuild(
                log, name, progress=lambda done, total: progress.update(task, completed=done, total=total)
            )


@graph_app.command("query", help="Run read-only Cypher against the graph (writes are refused).")
def graph_query(
    ctx: typer.Context,
    cypher: Annotated[str, typer.Argument(help="One read-only Cypher statement")],
    params: Annotated[str, typer.Option(help="Parameters as a JSON object")] = "{}",
    as_json: JsonOption = False,
) -> None:
    try:
        parameters = json.loads(params)
    except json.JSONDecodeError as exc:
        fail(f"invalid input: params: not valid JSON ({exc})", EXIT_INVALID)
    rows = run(_query(settings_of(ctx), cypher, parameters))
    if as_json:
        print_json(rows)
        return
    for row in rows:
        print(json.dumps(row, ensure_ascii=False, default=str))
    console.print(f"{len(rows)} row(s)")


async def _query(settings: Settings, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    async with await EventLog.open(settings, persistent=False) as log:
        try:
            return await ask_cypher(log.client, cypher, params)
        except GraphStoreError as exc:
            fail(str(exc), EXIT_INVALID)
        except nats.errors.NoRespondersError:
            fail(
                "no graph projector is running to answer: start the node (`eventloom up --detach`)",
                EXIT_FAILED,
            )


def schema_plan_command(as_json: JsonOption = False) -> None:
    plan = schema_plan()
    if as_json:
        print_json([{"name": m.name, "checksum": m.checksum, "statements": list(m.statements)} for m in plan])
        return
    for migration in plan:
        print(f"-- {migration.name}  ({migration.statement_count} statements, {migration.checksum})")
        for statement in migration.statements:
            print(f"{statement};")
