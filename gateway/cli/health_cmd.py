"""`eventloom health node | ledger | query | gateway`: exit 0 when the role answers and none of the roles it
depends on is failing, 1 otherwise (for orchestrators' healthchecks; `--json` for scripts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

import msgspec
import nats.errors
import nats.js.errors
import typer
from nats.aio.client import Client
from rich.markup import escape

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import describe_stream
from eventloom.runtime import RoleState, RuntimeInfo, read_runtime, resolve_nats_url
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, out, print_failing, print_json, run, settings_of

health_app = typer.Typer(help="Is a role up? Exit 0 when it answers, 1 when not.", no_args_is_help=True)
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]
_TIMEOUT_S = 5.0
DEFAULT_GATEWAY_HEALTH = "http://127.0.0.1:8787/healthz"


def register(app: typer.Typer) -> None:
    app.add_typer(health_app, name="health")


def _report(ok: bool, detail: dict[str, Any], as_json: bool) -> None:
    failing = msgspec.convert(detail.pop("failing", None) or {}, dict[str, RoleState])
    if as_json:
        print_json({"ok": ok, **detail, "failing": failing})
        return _exit_unless(ok)
    verdict = "[green]healthy[/] " if ok else "[red]unhealthy[/] "
    out.print(verdict + escape(str(detail)), highlight=False)
    print_failing(failing)
    _exit_unless(ok)


def _exit_unless(ok: bool) -> None:
    if not ok:
        raise typer.Exit(EXIT_FAILED)


def _failing(states: dict[str, RoleState]) -> dict[str, Any]:
    return {name: msgspec.to_builtins(state) for name, state in states.items()}


@health_app.command("node", help="A node runs on this data dir and none of its roles is failing.")
def node(ctx: typer.Context, as_json: JsonOption = False) -> None:
    settings = settings_of(ctx)
    info = read_runtime(settings.runtime_file)
    if info is None:
        _report(False, {"reason": f"no node is running on {settings.data_dir}"}, as_json)
        return
    failing = info.failing()
    _report(not failing, {"pid": info.pid, "roles": info.roles, "failing": _failing(failing)}, as_json)


@health_app.command(
    "ledger",
    help="The node on this data dir runs the ledger mirror, it is not failing, and its consumer exists.",
)
def ledger(ctx: typer.Context, as_json: JsonOption = False) -> None:
    settings = settings_of(ctx)
    node = read_runtime(settings.runtime_file)
    if node is None or "ledger-mirror" not in node.roles:
        _report(False, {"reason": f"no node running the ledger mirror on {settings.data_dir}"}, as_json)
        return
    failing = {k: v for k, v in node.failing().items() if k == "ledger-mirror"}
    detail = run(_mirror_lag(settings)) | ({"failing": _failing(failing)} if failing else {})
    _report(detail.get("pending") is not None and not failing, detail, as_json)


async def _asked(settings: Settings, ask: Callable[[Client], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """`ask` on a fresh NATS connection; whatever goes wrong becomes the `reason` of an unhealthy report."""
    from readmodels.query.protocol import MemoryUnavailableError  # noqa: PLC0415 (imported when it runs)

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
    from eventloom.ledger.mirror import MIRROR_CONSUMER  # noqa: PLC0415 (imported when the command runs)

    async def lag(client: Client) -> dict[str, Any]:
        layout = await describe_stream(client, settings.stream)
        info = await client.jetstream().consumer_info(layout.name, MIRROR_CONSUMER)
        return {"pending": info.num_pending, "ack_pending": info.num_ack_pending}

    return await _asked(settings, lag)


@health_app.command(
    "query", help="A query service answers on NATS and no role beside it (its projectors) is failing."
)
def query(ctx: typer.Context, as_json: JsonOption = False) -> None:
    detail = run(_ask_query(settings_of(ctx)))
    _report(bool(detail.get("answered")) and not detail.get("failing"), detail, as_json)


async def _ask_query(settings: Settings) -> dict[str, Any]:
    from readmodels.query.client import MemoryClient  # noqa: PLC0415

    async def answered(client: Client) -> dict[str, Any]:
        health = await MemoryClient(client, timeout_s=_TIMEOUT_S).health()
        return {"answered": True, "failing": _failing(health.failing)}

    return await _asked(settings, answered)


@health_app.command(
    "gateway",
    help="The HTTP gateway answers GET /healthz: by default the one the node on this data dir serves "
    f"(recorded in runtime.json), else {DEFAULT_GATEWAY_HEALTH}.",
)
def gateway(
    ctx: typer.Context,
    url: Annotated[str | None, typer.Option("--url", help="The gateway's health URL")] = None,
    as_json: JsonOption = False,
) -> None:
    import httpx2  # noqa: PLC0415 (imported when the command runs)

    url = url or gateway_health_url(read_runtime(settings_of(ctx).runtime_file))
    try:
        response = httpx2.get(url, timeout=_TIMEOUT_S)
        ok = response.status_code == 200 and bool(response.json().get("ok"))
        detail: dict[str, Any] = {"status": response.status_code, **response.json()}
    except (httpx2.HTTPError, ValueError) as exc:
        ok, detail = False, {"reason": f"{url}: {exc}"}
    _report(ok, detail, as_json)


def gateway_health_url(node: RuntimeInfo | None) -> str:
    """The health URL of the gateway the running node serves (`up --http`), else the default one."""
    if node is None or not node.http_url:
        return DEFAULT_GATEWAY_HEALTH
    return node.http_url.removesuffix("/mcp").rstrip("/") + "/healthz"
