"""The HTTP gateway's door: a bearer token for MCP, a rate per token, limits on failed attempts, and the
audit of every refusal.

Limits follow the credential, not the address (every local agent shares 127.0.0.1): a request with a valid
token (or a webhook's valid signature) is never refused for others' failures, only for its own token's rate
(`RateLimiter`). A failed attempt (a 401: no token, a wrong one, a bad signature) counts against its source
address and against the attempted token's short digest (`FailedAttempts`); once either is over its limit,
further failing requests from it answer 429 instead of 401. The token is looked up first (one SHA-256 and a
constant-time compare per entry of the tokens file, in a worker thread), so being over the limit changes
only what a failing request is told.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from mcp.server.transport_security import RequestBodyLimitMiddleware
from starlette.responses import JSONResponse, Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.access.refusals import Refusal, RefusalAudit, failed, tell_gate, told
from gateway.access.tokens import TokenBook, bearer_token
from gateway.mcp.arguments import MAX_PAYLOAD_BYTES
from gateway.mcp.failures import REMEDIATION

log = logging.getLogger(__name__)
HEALTH_PATH: Final = "/healthz"
# A 1 MiB payload grows when JSON-escaped inside a JSON-RPC request; the tool itself enforces the 1 MiB.
MAX_BODY_BYTES: Final = 3 * MAX_PAYLOAD_BYTES
REFUSALS: Final = (401, 403, 429)
_DEFAULT_REASON: Final = {401: "unauthorized", 403: "forbidden", 429: "rate_limited"}


@dataclass
class RateLimiter:
    """A token bucket per caller: `rate` calls a second on average, bursts of up to `burst`."""

    rate: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)

    @classmethod
    def per_second(cls, rate: float) -> RateLimiter:
        """`rate` calls a second, in bursts of up to twice that."""
        return cls(rate=rate, burst=max(1, round(2 * rate)))

    def wait_s(self, caller: str) -> float:
        """0 when the call may go ahead (and is counted), else how long until it may."""
        now = self.clock()
        tokens, then = self._buckets.get(caller, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        if tokens >= 1.0:
            self._buckets[caller] = (tokens - 1.0, now)
            return 0.0
        self._buckets[caller] = (tokens, now)
        return (1.0 - tokens) / self.rate


@dataclass
class _Recent:
    """The times of the last `limit` failures of each key, for at most `max_keys` keys (the key that
    failed least recently is forgotten first): memory stays bounded whatever a caller sends."""

    limit: int
    window_s: float
    max_keys: int
    clock: Callable[[], float]
    _seen: OrderedDict[str, deque[float]] = field(default_factory=OrderedDict)

    def wait_s(self, key: str) -> float:
        seen = self._seen.get(key)
        if seen is None or len(seen) < self.limit:
            return 0.0
        return max(0.0, seen[0] + self.window_s - self.clock())

    def record(self, key: str) -> int:
        now = self.clock()
        seen = self._seen.pop(key, None) or deque(maxlen=self.limit)
        while seen and seen[0] <= now - self.window_s:
            seen.popleft()
        seen.append(now)
        self._seen[key] = seen
        if len(self._seen) > self.max_keys:
            self._seen.popitem(last=False)
        return len(seen)


@dataclass
class FailedAttempts:
    """Failed attempts per source address and per attempted token digest (two tables, so rotating one
    never evicts the other). After `limit` of either within `window_s`, a failing request from that
    source or with that digest is answered 429 until the oldest of them ages out."""

    limit: int = 10
    window_s: float = 60.0
    max_keys: int = 10_000
    clock: Callable[[], float] = time.monotonic
    sources: _Recent = field(init=False)
    attempts: _Recent = field(init=False)

    def __post_init__(self) -> None:
        self.sources = _Recent(self.limit, self.window_s, self.max_keys, self.clock)
        self.attempts = _Recent(self.limit, self.window_s, self.max_keys, self.clock)

    def blocked_for(self, source: str, attempt: str | None = None) -> float:
        """0 when a failing request from `source` (with the token digest `attempt`) may be told 401."""
        by_attempt = self.attempts.wait_s(attempt) if attempt is not None else 0.0
        return max(self.sources.wait_s(source), by_attempt)

    def record(self, source: str, attempt: str | None = None) -> int:
        """Count one failure; returns the source's failures within the window."""
        if attempt is not None:
            self.attempts.record(attempt)
        return self.sources.record(source)


class BearerGate:
    """ASGI middleware: no valid bearer token, no MCP; a token too fast, or a failing source or token
    digest over its limit, 429; every refusal counted (401) and audited.

    Requests that one of `open_routes` (the web view, plug-in routes) matches go to it without a token,
    limited to `MAX_BODY_BYTES`; they authenticate themselves and say why they refuse (`tell_gate`)."""

    def __init__(
        self,
        app: ASGIApp,
        book: TokenBook,
        limiter: RateLimiter,
        failures: FailedAttempts | None = None,
        open_routes: Sequence[Route] = (),
        audit: RefusalAudit | None = None,
    ) -> None:
        self.app = app
        self.book = book
        self.limiter = limiter
        self.failures = failures or FailedAttempts()
        self.open_routes = tuple(open_routes)
        self.open_app = RequestBodyLimitMiddleware(app, MAX_BODY_BYTES)
        self.audit = audit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == HEALTH_PATH:
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})
        watched = self._watching(scope, send)
        if any(route.matches(scope)[0] != Match.NONE for route in self.open_routes):
            await self.open_app(scope, receive, watched)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        token = bearer_token(headers.get("authorization"))
        principal = await asyncio.to_thread(self.book.principal, token) if token else None
        if principal is None:
            tell_gate(scope, failed(token))
            message = "authorization: a valid bearer token is required" if token else "authorization: missing"
            await _refuse(401, "unauthorized", message)(scope, receive, watched)
            return
        wait = self.limiter.wait_s(principal.name)
        if wait > 0:
            tell_gate(scope, Refusal(reason="rate_limited", principal=principal.name))
            message = f"rate: token {principal.name!r} exceeded {self.limiter.rate:g} calls/s"
            await _refuse(429, "rate_limited", message, wait)(scope, receive, watched)
            return
        await self.app(scope, receive, watched)

    def _watching(self, scope: Scope, send: Send) -> Send:
        """`send`, seeing each refusal as its answer starts: a failed attempt is counted, or, when its
        source or token digest is over the limit, answered 429 instead; then it is audited."""
        source = str((scope.get("client") or ("unknown", 0))[0])
        replaced = False

        async def watched(message: Message) -> None:
            nonlocal replaced
            if replaced:
                return  # the rest of the answer a 429 replaced
            status = message["status"] if message["type"] == "http.response.start" else 0
            if status not in REFUSALS:
                await send(message)
                return
            refusal = told(scope) or Refusal(reason=_DEFAULT_REASON[status])
            if status == 401 and refusal.counted:
                blocked = self.failures.blocked_for(source, refusal.attempt)
                if blocked > 0:
                    replaced, status = True, 429
                    refusal = Refusal(reason="too_many_failures", attempt=refusal.attempt)
                    text = f"authorization: too many failed attempts from {source} or with this token; wait"
                    await _refuse(429, "rate_limited", text, blocked)(scope, _no_body, send)
                else:
                    self._count(source, refusal, scope["path"])
            if not replaced:
                await send(message)
            if self.audit is not None and (status != 401 or refusal.counted):
                await self.audit.refused(status, refusal, scope["method"], scope["path"], source)

        return watched

    def _count(self, source: str, refusal: Refusal, path: str) -> None:
        failures = self.failures.record(source, refusal.attempt)
        log.warning(
            "refused %s from %s: %s (%d failed attempt(s) in %.0f s)",
            path,
            source,
            refusal.reason.replace("_", " "),
            failures,
            self.failures.window_s,
        )


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


def _refuse(status: int, code: str, message: str, wait_s: float = 0.0) -> Response:
    if status == 401:
        remediation = REMEDIATION.get("unauthorized")
        headers = {"WWW-Authenticate": 'Bearer realm="eventloom"'}
    else:
        remediation = "Slow down; retry after Retry-After."
        headers = {"Retry-After": str(max(1, math.ceil(wait_s)))}
    body = {"error": {"code": code, "message": message, "remediation": remediation}}
    return JSONResponse(body, status_code=status, headers=headers)
