"""`eventloom mcp`, `eventloom gateway http`, `eventloom query serve` and `eventloom tokens ...`: the MCP
gateway on stdio and HTTP, the query role on its own, and the HTTP gateway's bearer tokens."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer

from eventloom.errors import EventloomError
from eventloom.runtime import resolve_nats_url
from eventloom.settings import Settings
from gateway.access.tokens import Role, add_token, default_actors, read_tokens, revoke_token
from gateway.cli.common import EXIT_INVALID, console, fail, print_json, run, settings_of

if TYPE_CHECKING:  # the MCP SDK and the node are imported when a command runs (`--help` stays fast)
    from gateway.mcp.http import HttpGateway

DEFAULT_LISTEN = "127.0.0.1:8787"
gateway_app = typer.Typer(help="The MCP gateway as a role of its own.", no_args_is_help=True)
query_app = typer.Typer(help="The query role on its own.", no_args_is_help=True)
tokens_app = typer.Typer(
    help="Bearer tokens of the HTTP gateway (stored as SHA-256 digests).", no_args_is_help=True
)
ListenOption = Annotated[
    str, typer.Option("--listen", help="HOST:PORT to serve on (loopback unless you say otherwise)")
]


def register(app: typer.Typer) -> None:
    app.command(
        "mcp",
        help="Serve MCP on stdin/stdout for one agent. Uses the node running on this data dir (or "
        "EVENTLOOM_NATS_URL); when none runs, starts one in this process and stops it on exit.",
    )(mcp)
    app.command(
        "toolsets",
        help="The MCP toolsets and their tools, with what each costs in an agent's context. Enable them "
        "with EVENTLOOM_MCP_TOOLSETS (default: default) or per token (`tokens add --toolsets`).",
    )(toolsets_cmd)
    app.add_typer(gateway_app, name="gateway")
    app.add_typer(query_app, name="query")
    app.add_typer(tokens_app, name="tokens")


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"--listen: expected HOST:PORT, e.g. {DEFAULT_LISTEN}; got {listen!r}", EXIT_INVALID)
    return host, int(port)


def mcp(ctx: typer.Context) -> None:
    # stdout carries the protocol: everything else goes to stderr.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    run(_stdio(settings_of(ctx)))


async def _stdio(settings: Settings) -> None:
    from gateway.mcp.stdio import run_stdio  # noqa: PLC0415
    from gateway.node import node_url  # noqa: PLC0415

    async with node_url(settings) as url:
        await run_stdio(settings, url)


@gateway_app.command(
    "http",
    help="Serve MCP over streamable HTTP at /mcp (bearer tokens required; GET /healthz is open) on the "
    "node's NATS: EVENTLOOM_NATS_URL, else the node running on this data dir.",
)
def gateway_http(
    ctx: typer.Context,
    listen: ListenOption = DEFAULT_LISTEN,
    tokens: Annotated[
        str | None, typer.Option("--tokens", help="The tokens file (default: <data>/tokens.json)")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate", help="Calls per second per token, bursts of 2x (env: EVENTLOOM_GATEWAY_RATE; 50)"
        ),
    ] = None,
) -> None:
    settings = settings_of(ctx)
    if tokens is not None:
        settings = replace(settings, tokens_path=Path(tokens).absolute())
    if rate is not None:
        if rate <= 0:
            fail("--rate: must be more than 0", EXIT_INVALID)
        settings = replace(settings, gateway_rate=rate)
    host, port = parse_listen(listen)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(_serve_http(settings, host, port))


async def _serve_http(settings: Settings, host: str, port: int) -> None:
    from gateway.mcp.http import serve_http  # noqa: PLC0415

    stop = _stop_on_signals()

    async def announce(gateway: HttpGateway) -> None:
        console.print(f"MCP over HTTP at {gateway.url} (tokens: {settings.tokens_file}); Ctrl-C to stop")

    await serve_http(settings, resolve_nats_url(settings), host, port, stop, on_ready=announce)


@query_app.command(
    "serve",
    help="Run the read models (every projector EVENTLOOM_PROJECTORS enables: graph, keyword, vector, "
    "inferred and the packs') and answer their questions, memory queries and read-only Cypher over NATS, "
    "without the rest of the node (the ledger mirror, the producers).",
)
def query_serve(ctx: typer.Context) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(_serve_queries(settings_of(ctx)))


async def _serve_queries(settings: Settings) -> None:
    from eventloom.log import EventLog  # noqa: PLC0415
    from gateway.heartbeats import roles_heartbeat  # noqa: PLC0415
    from gateway.node import worker_roles  # noqa: PLC0415
    from gateway.supervisor import RoleSupervisor  # noqa: PLC0415
    from gateway.workers import enabled_projectors  # noqa: PLC0415

    stop = _stop_on_signals()
    async with await EventLog.open(settings) as log:
        supervisor = RoleSupervisor()
        # the packs' projectors too: their questions are answered where their read models live
        roles = worker_roles(log, stop, only=tuple(enabled_projectors(settings)), supervisor=supervisor)
        if "query" not in roles:
            raise EventloomError(
                "no memory read model is enabled: "
                "set EVENTLOOM_PROJECTORS to include graph, keyword or vector"
            )
        console.print(f"query role: {', '.join(sorted(roles))} (Ctrl-C to stop)")
        async with roles_heartbeat(log.client, settings, role="query", roles=sorted(roles)).running():
            await supervisor.run(roles, stop)


def toolsets_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print docs/mcp.md's table")] = False,
) -> None:
    from gateway.mcp.surface import (  # noqa: PLC0415 (the MCP SDK, when the command runs)
        TOKENIZER,
        first_line,
        markdown_table,
        toolset_surfaces,
    )

    surfaces = toolset_surfaces()
    if markdown:
        print(markdown_table(surfaces))
        return
    if as_json:
        listed = {
            surface.name: {
                "tools": [
                    {"name": tool["name"], "summary": first_line(tool["description"])}
                    for tool in surface.tools
                ],
                "tokens": surface.tokens,
            }
            for surface in surfaces
        }
        print_json({"toolsets": listed, "tokenizer": TOKENIZER})
        return
    for surface in surfaces:
        print(f"{surface.name}: {len(surface.tools)} tools, ~{surface.tokens:,} tokens")
        for tool in surface.tools:
            print(f"  {tool['name']}: {first_line(tool['description'])}")


def _stop_on_signals() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


@tokens_app.command("add", help="Create a token; it is printed once and stored only as a digest.")
def tokens_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Who holds it, e.g. ci-agent")],
    session: Annotated[
        list[str],
        typer.Option("--session", help="A session pattern it may touch (glob: proj-*, *); repeatable"),
    ],
    role: Annotated[str, typer.Option("--role", help="agent, or admin (replay and Cypher)")] = "agent",
    actor: Annotated[
        list[str] | None,
        typer.Option(
            "--actor",
            help="An actor it may append as (glob: agent:ci-*); repeatable. Default: an agent token "
            "mcp:NAME and agent:NAME, an admin token any",
        ),
    ] = None,
    may_review: Annotated[
        bool,
        typer.Option(
            "--may-review",
            help="May review derived memory: consolidation verdicts, promotions, retractions, accepted "
            "same_as edges (an admin token always may)",
        ),
    ] = False,
    toolsets: Annotated[
        str | None,
        typer.Option(
            "--toolsets",
            help="The MCP toolsets it sees, e.g. default,claims (or all). Default: the server's "
            "(EVENTLOOM_MCP_TOOLSETS). `eventloom mcp toolsets` lists them",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    if role not in ("agent", "admin"):
        fail("--role: expected agent or admin", EXIT_INVALID)
    path = settings_of(ctx).tokens_file
    actors = actor or default_actors(name, cast(Role, role))
    chosen = _toolsets_option(toolsets)
    try:
        token = add_token(
            path, name, cast(Role, role), session, actors, may_review=may_review, toolsets=chosen
        )
    except EventloomError as exc:
        fail(str(exc), EXIT_INVALID)
    if as_json:
        print_json(
            {
                "name": name,
                "role": role,
                "sessions": session,
                "actors": actors,
                "may_review": may_review or role == "admin",
                "toolsets": chosen,
                "token": token,
                "file": str(path),
            }
        )
        return
    review = ", may review" if may_review or role == "admin" else ""
    console.print(
        f"token {name!r} ({role}{review}, sessions {', '.join(session)}, actors {', '.join(actors)}) "
        f"stored in {path}; shown once:"
    )
    print(token)


@tokens_app.command("list", help="The tokens' names, roles and session patterns (never the tokens).")
def tokens_list(
    ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False
) -> None:
    entries = read_tokens(settings_of(ctx).tokens_file).tokens
    if as_json:
        print_json(
            [
                {
                    "name": e.name,
                    "role": e.role,
                    "sessions": e.sessions,
                    "actors": e.actor_patterns,
                    "may_review": e.may_review or e.role == "admin",
                    "toolsets": e.toolsets,
                    "created_at": e.created_at,
                }
                for e in entries
            ]
        )
        return
    for entry in entries:
        actors = ",".join(entry.actor_patterns)
        role = f"{entry.role}+review" if entry.may_review and entry.role != "admin" else entry.role
        toolsets = ",".join(entry.toolsets) if entry.toolsets is not None else "(server's toolsets)"
        print(f"{entry.name}  {role}  {','.join(entry.sessions)}  {actors}  {toolsets}  {entry.created_at}")


def _toolsets_option(text: str | None) -> list[str] | None:
    """`--toolsets` checked against the toolsets the installed tools declare."""
    if text is None:
        return None
    from gateway.mcp.server import installed_toolsets  # noqa: PLC0415 (the MCP SDK, when asked)
    from gateway.mcp.toolsets import ALL_TOOLSETS, parse_toolsets  # noqa: PLC0415

    try:
        chosen = parse_toolsets(text, installed_toolsets(), "--toolsets")
        return [ALL_TOOLSETS] if ALL_TOOLSETS in text.split(",") else sorted(chosen)
    except ValueError as exc:
        fail(str(exc), EXIT_INVALID)


@tokens_app.command("revoke", help="Delete a token; gateways stop accepting it within a second.")
def tokens_revoke(ctx: typer.Context, name: str) -> None:
    if not revoke_token(settings_of(ctx).tokens_file, name):
        fail(f"name: no token named {name!r}", EXIT_INVALID)
    console.print(f"revoked {name!r}")
