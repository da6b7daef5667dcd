"""`eventloom nats config|credentials`: the bus's users, for an external NATS server and for each role."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eventloom.bus.auth import ROLES, authorization_block, ensure_passwords
from eventloom.bus.cluster import ensure_route_secret
from eventloom.bus.embedded import ClusterBlock
from eventloom.keys import atomic_write
from gateway.cli.common import EXIT_INVALID, console, fail, print_json, settings_of

nats_app = typer.Typer(
    help="The bus's authentication: one NATS user per role, passwords generated into <data>/nats (0600).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    app.add_typer(nats_app, name="nats")


@nats_app.command(
    "config",
    help="Print the nats-server `authorization` block with every role's user and permissions; include it "
    "in an external server's config (the embedded server uses it already).",
)
def nats_config(
    ctx: typer.Context,
    output: Annotated[
        Path | None, typer.Option("--output", help="Write it to this file (mode 0600) instead of stdout")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Also write a `cluster` block routing to these members, HOST:PORT,... (every member may "
            "use the same file: a route to itself is ignored), with the route secret from "
            "<data>/nats/route-secret (generated, 0600)",
        ),
    ] = None,
    cluster_listen: Annotated[
        str, typer.Option("--cluster-listen", help="Where each member listens for routes")
    ] = "0.0.0.0:6222",
) -> None:
    settings = settings_of(ctx)
    block = authorization_block(ensure_passwords(settings.data_dir), settings.stream)
    if cluster is not None:
        block = _cluster_block(settings.nats_dir, cluster, cluster_listen) + block
    if output is None:
        print(block, end="")
        return
    try:
        atomic_write(output, block.encode(), mode=0o600)
    except OSError as exc:
        fail(f"--output: cannot write {output}: {exc.strerror}", EXIT_INVALID)
    console.print(f"wrote the authorization block for {len(ROLES)} roles to {output}")


def _cluster_block(nats_dir: Path, members: str, listen: str) -> str:
    routes = tuple(member.strip() for member in members.split(",") if member.strip())
    if not routes or any(not _is_host_port(route) for route in (*routes, listen)):
        fail(
            f"--cluster: expected HOST:PORT,HOST:PORT,... and --cluster-listen HOST:PORT, got {members!r}",
            EXIT_INVALID,
        )
    return ClusterBlock(listen=listen, routes=routes, password=ensure_route_secret(nats_dir)).render()


def _is_host_port(value: str) -> bool:
    host, _, port = value.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


@nats_app.command(
    "credentials",
    help=f"Print one role's credentials as the variables its process reads ({', '.join(ROLES)}).",
)
def nats_credentials(
    ctx: typer.Context,
    role: str,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    if role not in ROLES:
        fail(f"role: must be one of {', '.join(ROLES)}", EXIT_INVALID)
    password = ensure_passwords(settings_of(ctx).data_dir)[role]
    if as_json:
        print_json({"EVENTLOOM_NATS_USER": role, "EVENTLOOM_NATS_PASSWORD": password})
        return
    print(f"EVENTLOOM_NATS_USER={role}\nEVENTLOOM_NATS_PASSWORD={password}")
