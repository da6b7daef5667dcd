"""Streamable HTTP for the MCP server, behind a bearer-token gate and a per-token rate limit.

The gate answers 401 before the MCP layer sees a request without a valid token, and 429 (with
`Retry-After`) when a token calls faster than its rate; the server checks the token again per tool call,
with its session patterns. `GET /healthz` is open so orchestrators can probe it: 200 when a query service
answers and no role beside it is failing, else 503 with the reason (and each failing role's last error).

Plug-in routes: each entry point of group `eventloom.http_routes` names a function
`(settings: Settings, backend: Backend) -> Sequence[starlette.routing.Route]`, called once when the gateway
starts; its routes are served beside MCP (a pack's GitHub webhook, say). They authenticate callers
themselves (a signature, not a bearer token), so the gate lets exactly the requests those routes match
through without a token, still under the body limit, and counts each 401 they answer as a failed attempt of
the caller's address (too many, and the address is refused outright, like a guessed token). A plug-in that
fails to load, or returns anything but `Route`s off `/mcp` and `/healthz`, stops the gateway with an error
naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Final

import msgspec
import uvicorn
from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventloom.bus.heartbeat import HeartbeatPublisher
from eventloom.errors import EventloomError
from eventloom.settings import Settings
from gateway.access.backend import Backend, open_backend
from gateway.access.tokens import TokenBook, bearer_token
from gateway.mcp.arguments import MAX_PAYLOAD_BYTES
from gateway.mcp.failures import REMEDIATION
from gateway.mcp.server import BearerTokens, EventloomMCP
from gateway.web import web_routes
from readmodels.query.client import MemoryClient
from readmodels.query.protocol import MemoryUnavailableError

log = logging.getLogger(__name__)
MCP_PATH: Final = "/mcp"
HEALTH_PATH: Final = "/healthz"
HEALTH_TIMEOUT_S: Final = 5.0
# A 1 MiB payload grows when JSON-escaped inside a JSON-RPC request; the tool itself enforces the 1 MiB.
MAX_BODY_BYTES: Final = 3 * MAX_PAYLOAD_BYTES
HTTP_ROUTES_GROUP: Final = "eventloom.http_routes"


@dataclass
class RateLimiter:
    """A token bucket per caller: `rate` calls a second on average, bursts of up to `burst`."""

    rate: float
    burst: int
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def per_second(cls, rate: float) -> RateLimiter:
        """`rate` calls a second, in bursts of up to twice that."""
        return cls(rate=rate, burst=max(1, round(2 * rate)))

    def wait_s(self, caller: str) -> float:
        """0 when the call may go ahead (and is counted), else how long until it may."""
        now = time.monotonic()
        tokens, then = self._buckets.get(caller, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._buckets[caller] = (tokens - 1.0, now)
            return 0.0
        self._buckets[caller] = (tokens, now)
        return (1.0 - tokens) / self.rate


@dataclass
class FailedAttempts:
    """Missing or wrong tokens per client address. After `limit` of them within `window_s`, the address is
    refused outright (429) until the oldest ages out, whatever it presents: guessing tokens stays slow."""

    limit: int = 10
    window_s: float = 60.0
    max_addresses: int = 10_000
    _seen: dict[str, deque[float]] = field(default_factory=dict)

    def blocked_for(self, address: str) -> float:
        """0 when `address` may try, else the seconds until it may."""
        seen = self._recent(address)
        if len(seen) < self.limit:
            return 0.0
        return seen[0] + self.window_s - time.monotonic()

    def record(self, address: str) -> int:
        """Count one failure; returns the address's failures within the window."""
        if address not in self._seen and len(self._seen) >= self.max_addresses:
            self._seen.pop(next(iter(self._seen)))  # the oldest address seen: memory stays bounded
        seen = self._recent(address)
        seen.append(time.monotonic())
        self._seen[address] = seen
        return len(seen)

    def _recent(self, address: str) -> deque[float]:
        seen = self._seen.get(address, deque())
        horizon = time.monotonic() - self.window_s
        while seen and seen[0] < horizon:
            seen.popleft()
        return seen


class BearerGate:
    """ASGI middleware: no valid bearer token, no MCP; too fast, or too many failed tokens, 429.

    Requests that one of `open_routes` (the plug-in routes) matches go to it without a token, limited to
    `MAX_BODY_BYTES`; a 401 it answers counts as a failed attempt."""

    def __init__(
        self,
        app: ASGIApp,
        book: TokenBook,
        limiter: RateLimiter,
        failures: FailedAttempts | None = None,
        open_routes: Sequence[Route] = (),
    ) -> None:
        self.app = app
        self.book = book
        self.limiter = limiter
        self.failures = failures or FailedAttempts()
        self.open_routes = tuple(open_routes)
        self.open_app = RequestBodyLimitMiddleware(app, MAX_BODY_BYTES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        address = str((scope.get("client") or ("unknown", 0))[0])
        blocked = self.failures.blocked_for(address)
        if blocked > 0:
            message = f"authorization: too many failed attempts from {address}; wait before trying again"
            retry = {"Retry-After": str(max(1, math.ceil(blocked)))}
            await _refuse(429, "rate_limited", message, retry)(scope, receive, send)
            return
        if any(route.matches(scope)[0] != Match.NONE for route in self.open_routes):
            await self.open_app(scope, receive, self._counting_refusals(address, scope["path"], send))
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        token = bearer_token(headers.get("authorization"))
        principal = await asyncio.to_thread(self.book.principal, token) if token else None
        if principal is None:
            message = "authorization: a valid bearer token is required" if token else "authorization: missing"
            failed = self.failures.record(address)
            log.warning(
                "refused %s from %s: %s (%d failed attempt(s) in %.0f s)",
                scope["path"],
                address,
                "wrong token" if token else "no token",
                failed,
                self.failures.window_s,
            )
            await _refuse(401, "unauthorized", message, {"WWW-Authenticate": 'Bearer realm="eventloom"'})(
                scope, receive, send
            )
            return
        wait = self.limiter.wait_s(principal.name)
        if wait > 0:
            message = f"rate: token {principal.name!r} exceeded {self.limiter.rate:g} calls/s"
            retry = {"Retry-After": str(max(1, math.ceil(wait)))}
            await _refuse(429, "rate_limited", message, retry)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _counting_refusals(self, address: str, path: str, send: Send) -> Send:
        """`send`, counting a 401 answer of a plug-in route as a failed attempt of `address`."""

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                failed = self.failures.record(address)
                log.warning(
                    "refused %s from %s: its authentication failed (%d failed attempt(s) in %.0f s)",
                    path,
                    address,
                    failed,
                    self.failures.window_s,
                )
            await send(message)

        return counted


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


def _refuse(status: int, code: str, message: str, headers: dict[str, str]) -> Response:
    remediation = REMEDIATION.get("unauthorized") if status == 401 else "Slow down; retry after Retry-After."
    body = {"error": {"code": code, "message": message, "remediation": remediation}}
    return JSONResponse(body, status_code=status, headers=headers)


def http_app(
    server: EventloomMCP, book: TokenBook, limiter: RateLimiter, host: str, routes: Sequence[Route] = ()
) -> ASGIApp:
    async def healthz(request: Request) -> Response:
        tokens = await asyncio.to_thread(book.count)
        body: dict[str, Any] = {"tools": len(server.tool_names), "tokens": tokens}
        try:
            health = await MemoryClient(server.backend.log.client, timeout_s=HEALTH_TIMEOUT_S).health()
        except MemoryUnavailableError as exc:
            return JSONResponse({"ok": False, "reason": str(exc), **body}, status_code=503)
        failing = msgspec.to_builtins(health.failing)
        status = 200 if health.ok else 503
        return JSONResponse({"ok": health.ok, "failing": failing, **body}, status_code=status)

    server.custom_route(HEALTH_PATH, methods=["GET"])(healthz)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,  # any gateway replica can answer any request
        max_request_body_size=MAX_BODY_BYTES,
        host=host,
    )
    routes = [*routes, *web_routes(server.backend, book, limiter.wait_s)]  # the web view: docs/ui.md
    app.router.routes.extend(routes)
    return BearerGate(app, book, limiter, open_routes=routes)


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
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False)
        server = _QuietServer(config)
        serving = asyncio.create_task(server.serve(sockets=[self.socket]))
        stopping = asyncio.create_task(stop.wait())
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
