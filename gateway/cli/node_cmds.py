"""`eventloom up | down | status`."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Annotated, Any

import msgspec
import typer
from rich.markup import escape

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import StreamLayout, describe_stream, jetstream_api
from eventloom.dlq import dead_letter_counts
from eventloom.errors import EventloomError
from eventloom.ledger.files import ledger_path, ledger_sessions, read_incidents, read_tip
from eventloom.runtime import RoleState, RuntimeInfo, read_runtime, resolve_nats_url
from eventloom.settings import Settings, default_replicas
from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    console,
    fail,
    out,
    print_failing,
    print_json,
    print_table,
    report_table,
    run,
    settings_of,
)
from gateway.cli.mcp_cmds import parse_listen
from gateway.cli.peers_cmd import PEERS_HELP, peers

_START_TIMEOUT_S = 30.0


def register(app: typer.Typer) -> None:
    app.command(
        help="Start a node: embedded NATS (unless EVENTLOOM_NATS_URL is set), the ledger mirror, the "
        "projectors, producers and query service, and with --http the MCP gateway over HTTP."
    )(up)
    app.command(help="Stop the node running on this data dir.")(down)
    status_app = typer.Typer(
        help="Stream state, consumers and their lag, and ledger sessions; `status peers`: every process."
    )
    status_app.callback(invoke_without_command=True)(status)
    status_app.command(
        "peers", help=PEERS_HELP, short_help="Every process on the bus: alive, suspect or dead."
    )(peers)
    app.add_typer(status_app, name="status")


def up(
    ctx: typer.Context,
    detach: Annotated[
        bool, typer.Option("--detach", "-d", help="Run in the background; log to <data>/node.log")
    ] = False,
    sync: Annotated[
        str | None, typer.Option(help="JetStream fsync policy: always | default | a duration like 1s")
    ] = None,
    http: Annotated[
        str | None,
        typer.Option("--http", help="Also serve MCP over HTTP at HOST:PORT, e.g. 127.0.0.1:8787"),
    ] = None,
    replicas: Annotated[
        int | None,
        typer.Option(
            help="Replicas of the streams and KV buckets, 1-5 (EVENTLOOM_REPLICAS; default 3 in a cluster, "
            "else 1); an existing stream or bucket with more keeps them"
        ),
    ] = None,
    cluster: Annotated[
        int | None,
        typer.Option(
            help="Start 3 or 5 routed nats-servers on loopback instead of one (EVENTLOOM_CLUSTER; "
            "development and tests)"
        ),
    ] = None,
) -> None:
    settings = _with_options(settings_of(ctx), sync=sync, replicas=replicas, cluster=cluster)
    listen = parse_listen(http) if http is not None else None
    running = read_runtime(settings.runtime_file)
    # A file left by an unclean stop can name our own pid (PID 1 again in a restarted container).
    if running is not None and running.pid != os.getpid():
        hint = (
            f"; to serve MCP over HTTP from it: `eventloom gateway http --listen {http}`"
            if http is not None and not running.http_url
            else "; stop it first with `eventloom down`"
        )
        where = f"{settings.data_dir} (pid {running.pid}, {running.nats_url})"
        fail(f"a node is already running for {where}{hint}")
    if detach:
        _start_detached(settings, http)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(_run_node(settings, listen))


def _with_options(
    settings: Settings, *, sync: str | None, replicas: int | None, cluster: int | None
) -> Settings:
    changes: dict[str, object] = {"sync": sync, "replicas": replicas, "cluster": cluster}
    if cluster is not None and replicas is None and not os.environ.get("EVENTLOOM_REPLICAS"):
        changes["replicas"] = default_replicas(cluster)
    try:
        return Settings(**{**settings.__dict__, **{k: v for k, v in changes.items() if v is not None}})
    except ValueError as exc:
        fail(f"--{exc}", EXIT_INVALID)


async def _run_node(settings: Settings, http: tuple[str, int] | None) -> None:
    # The node, MCP and the built-in projectors are imported when the node starts, before it reports ready
    # (as when every command imported them): its roles then create their consumers at once.
    import projectors.backends  # noqa: F401, PLC0415
    from gateway.mcp.http import http_role  # noqa: PLC0415
    from gateway.node import Node  # noqa: PLC0415

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    node = Node(settings, gateway=http_role(settings, *http) if http is not None else None)
    task = asyncio.create_task(node.run(stop))
    ready = asyncio.create_task(node.ready.wait())
    await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if node.ready.is_set():
        console.print(f"eventloom node up: {node.url}  data dir {settings.data_dir}  (Ctrl-C to stop)")
        if http is not None:
            console.print(f"MCP over HTTP at http://{http[0]}:{http[1]}/mcp (tokens: {settings.tokens_file})")
    await task


def _start_detached(settings: Settings, http: str | None) -> None:
    from gateway.node_process import NodeProcess  # noqa: PLC0415 (imported when the command runs)

    try:
        info = NodeProcess(settings, http=http).start(timeout=_START_TIMEOUT_S)
    except EventloomError as exc:
        fail(f"{exc}\n(full log: {settings.data_dir / 'node.log'})")
    console.print(f"eventloom node started in the background: pid {info.pid}, {info.nats_url}")
    if http is not None:
        console.print(f"MCP over HTTP at {_gateway_url(settings, http)} (tokens: {settings.tokens_file})")


def _gateway_url(settings: Settings, http: str) -> str:
    """The gateway binds just after the node reports ready: its URL, once the runtime file has it."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        running = read_runtime(settings.runtime_file)
        if running is not None and running.http_url:
            return running.http_url
        time.sleep(0.1)
    return f"{http} (not up yet: see {settings.data_dir / 'node.log'})"


def down(ctx: typer.Context) -> None:
    settings = settings_of(ctx)
    info = read_runtime(settings.runtime_file)
    if info is None:
        console.print(f"no node is running for {settings.data_dir}")
        return
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if read_runtime(settings.runtime_file) is None:  # its lock is free: it is gone, reaped or not
            console.print(f"node {info.pid} stopped")
            return
        time.sleep(0.1)
    fail(f"node {info.pid} did not stop within 20s", EXIT_FAILED)


def status(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    if ctx.invoked_subcommand is not None:
        return  # `status peers`
    settings = settings_of(ctx)
    report = run(_status(settings))
    if as_json:
        print_json(report)
        return
    stream = report["stream"]
    node = report["node"]
    out.print(
        f"node: {_node_line(node)}  nats: {report['nats_url']}\n"
        f"stream {stream['name']}: {stream['messages']} events, {stream['bytes']} bytes, "
        f"{stream['partitions']} partitions, last seq {stream['last_seq']}; "
        f"dead letters: {report['dead_letters']} (refused as unverified: {report['refused']})\n"
        f"{_replicas_line(stream)}"
    )
    table = report_table("consumer", "lag", "lag s", "pending", "ack pending", "delivered", "refused")
    for consumer in report["consumers"]:
        lag_s = consumer["lag_s"]
        table.add_row(
            consumer["name"],
            str(consumer["lag"]),
            "-" if lag_s is None else f"{lag_s:.1f}",
            str(consumer["pending"]),
            str(consumer["ack_pending"]),
            str(consumer["delivered"]),
            str(consumer["refused"]),
        )
    print_table(table)
    print_failing(msgspec.convert((node or {}).get("failing", {}), dict[str, RoleState]))
    out.print(f"ledger: {len(report['ledger'])} sessions in {settings.ledger_dir}")
    for incident in report["ledger_incidents"]:
        out.print(f"[red]ledger incident[/] {escape(incident)}", highlight=False)


async def _status(settings: Settings) -> dict[str, Any]:
    from projectors.status import consumer_statuses, lag_seconds  # noqa: PLC0415 (imported when run)

    url = resolve_nats_url(settings)
    client = await connect(
        url, name="eventloom-status", persistent=False, credentials=credentials_of(settings)
    )
    try:
        layout = await describe_stream(client, settings.stream)
        info = await jetstream_api(client, f"STREAM.INFO.{layout.name}")
        consumers = await jetstream_api(client, f"CONSUMER.LIST.{layout.name}")
        dead_letters = sum((await dead_letter_counts(client)).values())
        statuses = {s.consumer: s for s in await consumer_statuses(client, layout)}
        refused = {name: s.refused or 0 for name, s in statuses.items()}
        listed = consumers.get("consumers") or []
        lags = [
            statuses[c["name"]].lag_s if c["name"] in statuses else await lag_seconds(client, layout.name, c)
            for c in listed
        ]
    finally:
        await client.close()
    return {
        "node": _node_summary(read_runtime(settings.runtime_file)),
        "nats_url": url,
        "stream": _stream_summary(layout, info),
        "consumers": _consumer_rows(listed, lags, refused),
        "dead_letters": dead_letters,
        "refused": sum(refused.values()),
        "ledger": await asyncio.to_thread(_ledger_summary, settings),
        "ledger_incidents": await asyncio.to_thread(read_incidents, settings.ledger_dir),
    }


def _node_summary(node: RuntimeInfo | None) -> dict[str, Any] | None:
    if node is None:
        return None
    return {
        "pid": node.pid,
        "embedded_nats": node.embedded,
        "roles": node.roles,
        "http_url": node.http_url,
        "role_states": msgspec.to_builtins(node.role_states),
        "failing": msgspec.to_builtins(node.failing()),
    }


def _stream_summary(layout: StreamLayout, info: dict[str, Any]) -> dict[str, Any]:
    state = info.get("state", {})
    return {
        "name": layout.name,
        "partitions": layout.partitions,
        "atomic_batches": layout.atomic_batches,
        "messages": state.get("messages", 0),
        "bytes": state.get("bytes", 0),
        "first_seq": state.get("first_seq", 0),
        "last_seq": state.get("last_seq", 0),
        "sessions": state.get("num_subjects", 0),
        "replicas": int(info.get("config", {}).get("num_replicas", 1)),
        "cluster": _cluster_of(info),
    }


def _consumer_rows(
    listed: list[dict[str, Any]], lags: list[float | None], refused: dict[str, int]
) -> list[dict[str, Any]]:
    return [
        {
            "name": c["name"],
            "lag": c.get("num_pending", 0) + c.get("num_ack_pending", 0),
            "lag_s": lag_s,
            "pending": c.get("num_pending", 0),
            "ack_pending": c.get("num_ack_pending", 0),
            "delivered": c.get("delivered", {}).get("stream_seq", 0),
            "durable": bool(c.get("config", {}).get("durable_name")),
            "refused": refused.get(c["name"], 0),
        }
        for c, lag_s in zip(listed, lags, strict=True)
    ]


def _cluster_of(info: dict[str, Any]) -> dict[str, Any] | None:
    """Where the stream's replicas are: its leader and the other peers (None: not in a cluster)."""
    cluster = info.get("cluster") or {}
    if not cluster.get("leader") and not cluster.get("replicas"):
        return None
    peers = [
        {"name": r.get("name"), "current": bool(r.get("current")), "lag": int(r.get("lag", 0))}
        for r in cluster.get("replicas") or []
    ]
    return {"name": cluster.get("name"), "leader": cluster.get("leader"), "peers": peers}


def _replicas_line(stream: dict[str, Any]) -> str:
    cluster = stream["cluster"]
    if cluster is None:
        return f"replicas: {stream['replicas']}"
    peers = ", ".join(
        f"{p['name']} ({'current' if p['current'] else 'behind'}, lag {p['lag']})" for p in cluster["peers"]
    )
    return f"replicas: {stream['replicas']}, leader {cluster['leader'] or 'none'}; peers: {peers or 'none'}"


def _node_line(node: dict[str, Any] | None) -> str:
    if node is None:
        return "not running"
    failing = node["failing"]
    roles = ", ".join(f"{r} [red](failing)[/]" if r in failing else r for r in node["roles"])
    return f"pid {node['pid']}, roles: {roles}"


def _ledger_summary(settings: Settings) -> list[dict[str, Any]]:
    return [
        {"session": s, "last_seq": read_tip(ledger_path(settings.ledger_dir, s)).seq}
        for s in ledger_sessions(settings.ledger_dir)
    ]
