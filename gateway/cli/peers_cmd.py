"""`eventloom status peers`: every Eventloom process on the bus, from its last heartbeat."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.peers import PeerStatus, read_peers
from eventloom.runtime import resolve_nats_url
from eventloom.settings import Settings
from gateway.cli.common import out, print_json, print_table, report_table, run, settings_of

PEERS_HELP = (
    "Every Eventloom process on the bus (node, workers, query service, MCP gateways), from its last "
    "heartbeat: alive, suspect (silent for EVENTLOOM_PEER_SUSPECT_AFTER_S, default 6s) or dead (silent for "
    "EVENTLOOM_PEER_DEAD_AFTER_S, default 20s). Ages need this host's clock and the NATS server's to agree."
)
_STYLE = {"alive": "green", "suspect": "yellow", "dead": "red"}


def peers(
    ctx: typer.Context,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON list: id, role, status, age_s, heartbeat_seq, capabilities, lag, urls, "
            "version, host, pid, sent_at",
        ),
    ] = False,
) -> None:
    found = run(_peers(settings_of(ctx)))
    if as_json:
        print_json([peer.flat() for peer in found])
        return
    table = report_table("id", "role", "status", "age s", "seq", "capabilities", "lag", "urls")
    for peer in found:
        beat = peer.heartbeat
        lag = "-" if beat.lag is None else ", ".join(f"{c} {n}" for c, n in sorted(beat.lag.items())) or "0"
        table.add_row(
            escape(beat.id),
            escape(beat.role),
            f"[{_STYLE[peer.status]}]{peer.status}[/]",
            f"{peer.age_s:.1f}",
            str(beat.heartbeat_seq),
            escape(", ".join(beat.capabilities)),
            escape(lag),
            escape(", ".join(beat.urls)),
        )
    print_table(table)
    if not found:
        out.print("no peers: no Eventloom process has published a heartbeat lately")


async def _peers(settings: Settings) -> list[PeerStatus]:
    client = await connect(
        resolve_nats_url(settings),
        name="eventloom-peers",
        persistent=False,
        credentials=credentials_of(settings),
    )
    try:
        return await read_peers(client, settings)
    finally:
        await client.close()
