"""`eventloom health ledger | query | gateway`: exit 0 when the role answers, 1 when it does not (for
orchestrators' healthchecks; `--json` for scripts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import httpx2
import nats.errors
import nats.js.errors
import typer
from nats.aio.client import Client

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import describe_stream
from eventloom.ledger.mirror import MIRROR_CONSUMER
from eventloom.runtime import read_runtime, resolve_nats_url
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, console, print_json, run, settings_of
from readmodels.query.client import MemoryClient
from readmodels.query.protocol import MemoryUnavailableError

health_app = typer.Typer(help="Is a role up? Exit 0 when it answers, 1 when not.", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]
_TIMEOUT_S = 5.0


def register(app: typer.Typer) -> None:
    app.add_typer(health_app, name="health")


def _report(ok: bool, detail: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json({"ok": ok, **detail})
    else:
        console.print(("[green]healthy[/] " if ok else "[red]unhealthy[/] ") + str(detail), highlight=False)
    if not ok:
        raise typer.Exit(EXIT_FAILED)


@health_app.command(
    "ledger", help="The node on this data dir runs the ledger mirror, and its consumer exists."
)
def ledger(ctx: typer.Context, as_json: JsonOption = False) -> None:
    settings = settings_of(ctx)
    node = read_runtime(settings.runtime_file)
    if node is None or "ledger-mirror" not in node.roles:
        _report(False, {"reason": f"no node running the ledger mirror on {settings.data_dir}"}, as_json)
        return
    detail = run(_mirror_lag(settings))
    _report(detail.get("pending") is not None, detail, as_json)


async def _asked(settings: Settings, ask: Callable[[Client], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """`ask` on a fresh NATS connection; whatever goes wrong becomes the `reason` of an unhealthy report."""
    try:
        client = await connect(
            resolve_nats_url(settings),
            name="eventloom-health",
            persistent=False,
            credentials=credentials_of(settings),
        )
    except Exception as exc:
        return {"reason": f"NATS: {exc}"}
    try:
        return await ask(client)
    except (nats.errors.Error, nats.js.errors.Error, MemoryUnavailableError) as exc:
        return {"reason": str(exc)}
    finally:
        await client.close()


async def _mirror_lag(settings: Settings) -> dict[str, Any]:
    async def lag(client: Client) -> dict[str, Any]:
        layout = await describe_stream(client, settings.stream)
        info = await client.jetstream().consumer_info(layout.name, MIRROR_CONSUMER)
        return {"pending": info.num_pending, "ack_pending": info.num_ack_pending}

    return await _asked(settings, lag)


@health_app.command("query", help="A query service answers on NATS.")
def query(ctx: typer.Context, as_json: JsonOption = False) -> None:
    detail = run(_ask_query(settings_of(ctx)))
    _report(bool(detail.get("answered")), detail, as_json)


async def _ask_query(settings: Settings) -> dict[str, Any]:
    async def answered(client: Client) -> dict[str, Any]:
        return {"answered": await MemoryClient(client, timeout_s=_TIMEOUT_S).healthy()}

    return await _asked(settings, answered)


@health_app.command("gateway", help="The HTTP gateway answers GET /healthz.")
def gateway(
    url: Annotated[
        str, typer.Option("--url", help="The gateway's health URL")
    ] = "http://127.0.0.1:8787/healthz",
    as_json: JsonOption = False,
) -> None:
    try:
        response = httpx2.get(url, timeout=_TIMEOUT_S)
        ok = response.status_code == 200 and bool(response.json().get("ok"))
        detail: dict[str, Any] = {"status": response.status_code, **response.json()}
    except (httpx2.HTTPError, ValueError) as exc:
        ok, detail = False, {"reason": f"{url}: {exc}"}
    _report(ok, detail, as_json)
