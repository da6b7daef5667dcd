"""`eventloom graph query`: read-only Cypher, answered over NATS by the process that owns the graph."""

from __future__ import annotations

import json
from typing import Annotated, Any

import nats.errors
import typer

from eventloom.errors import EventValidationError
from eventloom.settings import Settings
from eventloom.validation import decode_json_input
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, print_json, run, settings_of
from readmodels.graph.protocol import GraphStoreError

graph_app = typer.Typer(help="The temporal memory graph read model.", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def register(app: typer.Typer) -> None:
    app.add_typer(graph_app, name="graph")


@graph_app.command("query", help="Run read-only Cypher against the graph (writes are refused).")
def graph_query(
    ctx: typer.Context,
    cypher: Annotated[str, typer.Argument(help="One read-only Cypher statement")],
    params: Annotated[str, typer.Option(help="Parameters as a JSON object")] = "{}",
    as_json: JsonOption = False,
) -> None:
    try:
        parameters = decode_json_input(params, "params", dict[str, Any])
    except EventValidationError as exc:
        fail(f"invalid input: {exc}", EXIT_INVALID)
    rows = run(_query(settings_of(ctx), cypher, parameters))
    if as_json:
        print_json(rows)
        return
    for row in rows:
        print(json.dumps(row, ensure_ascii=False, default=str))
    console.print(f"{len(rows)} row(s)")


async def _query(settings: Settings, cypher: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    from eventloom.log import EventLog  # noqa: PLC0415 (imported when the command runs)
    from readmodels.query.cypher_service import ask_cypher  # noqa: PLC0415

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
