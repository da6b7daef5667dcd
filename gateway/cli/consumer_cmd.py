"""`eventloom consumer list | rm`: the durable consumers on the stream, and removing one a plug-in left."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import nats.js.errors
import typer
from nats.aio.client import Client
from rich.markup import escape

from eventloom.bus.stream import StreamLayout, jetstream_api
from eventloom.runtime import read_runtime
from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    console,
    fail,
    on_stream,
    print_json,
    print_table,
    report_table,
    run,
    settings_of,
)

consumer_app = typer.Typer(help="Durable consumers on the event stream.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(consumer_app, name="consumer")


@consumer_app.command("list", help="Every durable consumer: pending, acknowledged up to, and who reads it.")
def consumer_list(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False
) -> None:
    from gateway.node import role_of_consumer  # noqa: PLC0415 (imported when the command runs)

    settings = settings_of(ctx)
    node = read_runtime(settings.runtime_file)
    rows = [
        {**row, "node_role": role_of_consumer(row["name"], node) if node else None}
        for row in run(on_stream(settings, "eventloom-consumers", _listed))
    ]
    if as_json:
        print_json(rows)
        return
    table = report_table("consumer", "pending", "acknowledged up to", "node role")
    for row in rows:
        table.add_row(row["name"], str(row["pending"]), str(row["ack_floor"]), row["node_role"] or "-")
    print_table(table)


async def _listed(client: Client, layout: StreamLayout) -> list[dict[str, Any]]:
    listing = await jetstream_api(client, f"CONSUMER.LIST.{layout.name}")
    return [
        {
            "name": info["name"],
            "pending": int(info.get("num_pending", 0)),
            "ack_floor": int(info.get("ack_floor", {}).get("stream_seq", 0)),
        }
        for info in listing.get("consumers") or []
    ]


@consumer_app.command(
    "rm",
    help="Remove a durable consumer (e.g. one a removed producer left) and its status entry. Its dead "
    "letters stay. Asks first unless --yes; refuses the ledger mirror's and any the running node reads.",
)
def consumer_rm(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The consumer, as `eventloom consumer list` names it")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
) -> None:
    from eventloom.ledger.mirror import MIRROR_CONSUMER  # noqa: PLC0415 (imported when the command runs)
    from gateway.node import role_of_consumer  # noqa: PLC0415

    settings = settings_of(ctx)
    if name == MIRROR_CONSUMER:
        fail(
            "the ledger mirror's consumer is what keeps the ledger complete: it is never removed",
            EXIT_INVALID,
        )
    node = read_runtime(settings.runtime_file)
    role = role_of_consumer(name, node) if node else None
    if role is not None:
        fail(
            f"the running node reads {name} (role {role}): take it out of the node first "
            "(EVENTLOOM_PROJECTORS / EVENTLOOM_PRODUCERS, then `eventloom down` and `eventloom up`)",
            EXIT_INVALID,
        )
    if not yes:
        if not sys.stdin.isatty():
            fail(f"removing {name} needs a confirmation: run it in a terminal, or pass --yes", EXIT_INVALID)
        typer.confirm(
            f"Remove consumer {name}? A worker that uses it would start over from the beginning", abort=True
        )
    if not run(
        on_stream(settings, "eventloom-consumer-rm", lambda client, layout: _remove(client, layout, name))
    ):
        fail(f"no consumer named {escape(name)} on the stream (see `eventloom consumer list`)", EXIT_FAILED)
    console.print(f"removed consumer {escape(name)}", highlight=False)


async def _remove(client: Client, layout: StreamLayout, name: str) -> bool:
    from projectors.status import forget_consumer  # noqa: PLC0415

    try:
        await client.jetstream().delete_consumer(layout.name, name)
    except nats.js.errors.NotFoundError:
        return False
    await forget_consumer(client, name)
    return True
