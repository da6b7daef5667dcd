"""Streamable HTTP for the MCP server, behind the gateway's door (`gateway.mcp.gate`): bearer tokens, a
rate per token, limits on failed attempts, and every refusal audited.

The gate answers 401 before the MCP layer sees a request without a valid token, and 429 (with
`Retry-After`) when a token calls faster than its rate; the server checks the token again per tool call,
with its session patterns. `GET /healthz` is open so orchestrators can probe it, and says no more than
`ok` and the names of the failing roles: 200 when a query service answers and no role beside it is
failing, else 503.

Plug-in routes: each entry point of group `eventloom.http_routes` names a function
`(settings: Settings, backend: Backend) -> Sequence[starlette.routing.Route]`, called once when the gateway
starts; its routes are served beside MCP (a pack's GitHub webhook, say). They authenticate callers
themselves (a signature, not a bearer token), so the gate lets exactly the requests those routes match
through without a token, still under the body limit, and treats each 401 they answer as a failed attempt
(counted against the caller's address, then answered 429 once it is over the limit; docs/security.md). A
plug-in that fails to load, or returns anything but `Route`s off `/mcp` and `/healthz`, stops the gateway
with an error naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator, Sequence
from importlib.metadata import entry_points
from typing import Any, Final

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from eventloom.bus.heartbeat import HeartbeatPublisher
from eventloom.errors import EventloomError
from eventloom.settings import Settings
from gateway.access.backend import Backend, open_backend
from gateway.access.refusals import AUDIT_ACTOR, AUDIT_TYPE, RefusalAudit
from gateway.access.tokens import TokenBook
from gateway.mcp.gate import HEALTH_PATH, MAX_BODY_BYTES, BearerGate, RateLimiter
from gateway.mcp.server import BearerTokens, EventloomMCP
from gateway.web import web_routes
from readmodels.query.client import MemoryClient
from readmodels.query.protocol import MemoryUnavailableError

log = logging.getLogger(__name__)
MCP_PATH: Final = "/mcp"
HEALTH_TIMEOUT_S: Final = 5.0
FAILING: Final = {"state": "failing"}
"""All `/healthz` says of a failing role (`eventloom health gateway` reads it as a `RoleState`)."""
HTTP_ROUTES_GROUP: Final = "eventloom.http_routes"


def plugin_routes(settings: Settings, backend: Backend) -> list[Route]:
    """The routes of every installed `eventloom.http_routes` plug-in, in the order of their names."""
    routes: list[Route] = []
    for entry in sorted(entry_points(group=HTTP_ROUTES_GROUP), key=lambda entry: entry.name):
        try:
            made = list(entry.load()(settings, backend))
        except Exception as exc:
            raise EventloomError(f"http routes plug-in {entry.name!r} failed to load: {exc}") from exc
        for route in made:
            if not isinstance(route, Route):
                raise EventloomError(
                    f"http routes plug-in {entry.name!r}: {route!r} is not a starlette Route"
                )
            if route.path in (MCP_PATH, HEALTH_PATH) or route.path.startswith(f"{MCP_PATH}/"):
                raise EventloomError(f"http routes plug-in {entry.name!r}: {route.path} is the gateway's own")
        log.info("http routes of plug-in %r: %s", entry.name, ", ".join(route.path for route in made))
        routes += made
    return routes


def http_app(
    server: EventloomMCP, book: TokenBook, limiter: RateLimiter, host: str, routes: Sequence[Route] = ()
) -> BearerGate:
    async def healthz(request: Request) -> Response:
        """Open to anyone: `ok` and the failing roles' names, never their errors, hosts or tokens."""
        try:
            health = await MemoryClient(server.backend.log.client, timeout_s=HEALTH_TIMEOUT_S).health()
        except MemoryUnavailableError:
            return JSONResponse({"ok": False, "failing": {"query": FAILING}}, status_code=503)
        failing = {role: FAILING for role in sorted(health.failing)}
        return JSONResponse({"ok": health.ok, "failing": failing}, status_code=200 if health.ok else 503)

    server.custom_route(HEALTH_PATH, methods=["GET"])(healthz)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,  # any gateway replica can answer any request
        max_request_body_size=MAX_BODY_BYTES,
        host=host,
    )
    routes = [*routes, *web_routes(server.backend, book, limiter.wait_s)]  # the web view: docs/ui.md
    app.router.routes.extend(routes)
    return BearerGate(app, book, limiter, open_routes=routes, audit=refusal_audit(server.backend))


def refusal_audit(backend: Backend) -> RefusalAudit:
    """Refusals audited in the backend's audit session, as the gateway (docs/security.md, section 4)."""

    async def append(payload: dict[str, Any], principal: str | None) -> None:
        await backend.log.append(backend.audit_session, AUDIT_TYPE, AUDIT_ACTOR, payload, principal=principal)

    return RefusalAudit(append)


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """The process that runs the gateway (the node, the CLI) owns the signals, not uvicorn."""
        yield


class HttpGateway:
    """The MCP server on streamable HTTP at `host:port` (port 0: any free port; see `address`)."""

    def __init__(
        self,
        server: EventloomMCP,
        book: TokenBook,
        host: str,
        port: int,
        limiter: RateLimiter,
        routes: Sequence[Route] = (),
    ) -> None:
        self.app = http_app(server, book, limiter, host, routes)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say so, and without it every
        # response waits ~40 ms for a delayed ACK (headers and body are two writes).
        self.socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host = host
        self.ready = asyncio.Event()

    @property
    def address(self) -> tuple[str, int]:
        bound: tuple[Any, ...] = self.socket.getsockname()
        return self.host, int(bound[1])

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"

    async def run(self, stop: asyncio.Event) -> None:
        # No proxy headers: any local process could claim any address in X-Forwarded-For, and the failed
        # attempts' limits and the audit of refusals go by the address a request really came from.
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="on", access_log=False, proxy_headers=False
        )
        server = _QuietServer(config)
        serving = asyncio.create_task(server.serve(sockets=[self.socket]))
        stopping = asyncio.create_task(stop.wait())
        served = asyncio.Event()
        flushing = asyncio.create_task(self.app.audit.flushing(served)) if self.app.audit else None
        try:
            while not server.started and not serving.done():  # noqa: ASYNC110 (uvicorn offers only a flag)
                await asyncio.sleep(0.02)
            if server.started:
                self.ready.set()
            await asyncio.wait({serving, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
            server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(serving, 10)
            self.socket.close()
            served.set()
            if flushing is not None:
                await flushing


def http_role(
    settings: Settings, host: str, port: int
) -> Callable[[str, asyncio.Event, Callable[[str], Awaitable[None]]], Awaitable[None]]:
    """The HTTP gateway as a node's role (`gateway.node.GatewayRole`): serve from the node's NATS URL, say
    the MCP URL once listening (the node's heartbeat names it: the gateway sends none of its own)."""

    def role(url: str, stop: asyncio.Event, on_ready: Callable[[str], Awaitable[None]]) -> Awaitable[None]:
        async def listening(gateway: HttpGateway) -> None:
            await on_ready(gateway.url)

        return serve_http(settings, url, host, port, stop, on_ready=listening, heartbeat=False)

    return role


async def serve_http(
    settings: Settings,
    url: str | None,
    host: str,
    port: int,
    stop: asyncio.Event,
    *,
    on_ready: Callable[[HttpGateway], Awaitable[None]] | None = None,
    heartbeat: bool = True,
) -> None:
    """The HTTP gateway on the NATS at `url` (None: the settings' or the running node's), until `stop`;
    with `heartbeat`, a peer on the bus (role gateway-http, its MCP URL) while it listens."""
    backend = await open_backend(settings, url)
    try:
        book = TokenBook(settings.tokens_file)
        if await asyncio.to_thread(book.count) == 0:
            log.warning(
                "no tokens in %s: every call will be refused; add one with "
                "`eventloom tokens add NAME --session 'PATTERN'`",
                settings.tokens_file,
            )
        server = EventloomMCP(backend, BearerTokens(book))
        limiter = RateLimiter.per_second(settings.gateway_rate)
        gateway = HttpGateway(server, book, host, port, limiter, plugin_routes(settings, backend))
        running = asyncio.create_task(gateway.run(stop))
        await asyncio.wait(
            {running, asyncio.create_task(gateway.ready.wait())}, return_when=asyncio.FIRST_COMPLETED
        )
        if gateway.ready.is_set() and on_ready is not None:
            await on_ready(gateway)
        peer = HeartbeatPublisher(
            backend.log.client, settings, role="gateway-http", capabilities=["mcp-http"], urls=[gateway.url]
        )
        async with peer.running() if heartbeat else contextlib.nullcontext(peer):
            await running
    finally:
        await backend.log.close()
