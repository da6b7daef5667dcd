"""`eventloom dev neo4j`: a local Neo4j 5.26 community server for development, until Ctrl-C."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import EXIT_FAILED, console, fail, print_json
from readmodels.neo4j.local import NEO4J_VERSION, LocalNeo4j, Neo4jUnavailable, missing_tools

dev_app = typer.Typer(help="Tools for developing against Eventloom.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(dev_app, name="dev")


@dev_app.command(
    "neo4j",
    help=f"Run a local Neo4j {NEO4J_VERSION} community server (jars from Maven Central, cached in "
    "~/.cache/eventloom; Bolt on 127.0.0.1 only) and print its URI and credentials; Ctrl-C stops it.",
)
def dev_neo4j(
    port: Annotated[int, typer.Option(help="Bolt port (default: a free one)")] = 0,
    data: Annotated[
        Path | None,
        typer.Option(
            help="Keep the database in this directory (default: a temporary one); its password is kept "
            "there too (eventloom-neo4j-password, mode 0600), so a restart on it reuses it"
        ),
    ] = None,
    page_cache_mib: Annotated[int, typer.Option(help="Page cache size in MiB")] = 512,
    heap: Annotated[str, typer.Option(help="JVM heap, e.g. 2g")] = "2g",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    missing = missing_tools()
    if missing is not None:
        fail(missing, EXIT_FAILED)
    try:
        server = LocalNeo4j(data, port=port or None, page_cache_mib=page_cache_mib, heap=heap)
    except Neo4jUnavailable as exc:  # an unreadable password file: said at once, before any wait
        fail(str(exc), EXIT_FAILED)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        if not as_json:
            console.print("starting Neo4j (the first start fetches its jars with Maven) ...")
        endpoint = server.start()
        if as_json:
            described = {"uri": endpoint.uri, "user": endpoint.user, "password": endpoint.password}
            print_json({**described, "source": endpoint.source, "home": str(server.home)})
        else:
            print(f"Neo4j {NEO4J_VERSION} is running at {endpoint.uri} (user {endpoint.user})")
            print("export " + " ".join(f"{name}={value}" for name, value in endpoint.environment().items()))
            print("export EVENTLOOM_GRAPH_BACKEND=neo4j")
            console.print(f"data in {server.home}; Ctrl-C stops the server")
        stop.wait()
    except Neo4jUnavailable as exc:
        fail(str(exc), EXIT_FAILED)
    finally:
        server.close()
