"""The HTTP gateway's refusals (401, 403, 429): what a route tells the gate about one, and their audit.

Routes that authenticate callers themselves (the web view, a pack's webhook) answer their own refusals; the
gate around them (`gateway.mcp.gate`) reads what they told it off the request's ASGI scope (`tell_gate`):
the reason, the attempted token's short digest (`attempt_key`), the principal of a valid token that was
refused, and whether a 401 was a failed attempt at all (the login form shown to a caller who presented
nothing is not).

`RefusalAudit` writes them to the audit session as `access.refused` events, beside MCP's
`tool.call.completed`, without a token or a body: at most one event per (status, reason, source address,
principal) and window, the first refusal at once and the rest of the window as one event with their count,
so a flood of bad requests writes a bounded number of events, not one per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from eventloom.event import utc_timestamp

log = logging.getLogger(__name__)
AUDIT_TYPE: Final = "access.refused"
AUDIT_ACTOR: Final = "eventloom-gateway"
AUDIT_WINDOW_S: Final = 60.0
ATTEMPT_CHARS: Final = 8
"""How much of a presented token its attempt key digests: `elt_` and 4 random characters (24 of the 256 bits
a token holds), so neither the key nor a log of it says anything useful about a real token."""
MAX_LISTED: Final = 8
"""Distinct requests and attempt keys an audit event lists (its count covers the rest)."""
MAX_AUDIT_KEYS: Final = 1024
"""Open windows at most; beyond, refusals share one window per (status, reason) with the source `*`."""
_STATE: Final = "eventloom_refusal"
_PATH_CHARS: Final = 200


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """Why a request was refused: `reason` (`missing_token`, `wrong_token`, `bad_signature`,
    `forbidden`, `foreign_origin`, `rate_limited`, `too_many_failures`), the attempted token's
    `attempt_key`, the `principal` of a valid token refused anyway (403, its rate), and whether a 401 is
    a failed attempt of its source (`counted`)."""

    reason: str
    attempt: str | None = None
    principal: str | None = None
    counted: bool = True


LOGIN_FORM: Final = Refusal(reason="login_form", counted=False)
"""The login form, shown with a 401 to a caller who presented nothing: not an attempt, not audited."""


def attempt_key(token: str) -> str:
    """A short digest of a presented token's first characters: it tells one guesser's tries apart."""
    return hashlib.sha256(token[:ATTEMPT_CHARS].encode("utf-8", "replace")).hexdigest()[:12]


def failed(token: str | None) -> Refusal:
    """The refusal of a request whose token (None: none was presented) matched no entry."""
    if not token:
        return Refusal(reason="missing_token")
    return Refusal(reason="wrong_token", attempt=attempt_key(token))


def tell_gate(scope: MutableMapping[str, Any], refusal: Refusal) -> None:
    """Say why the answer about to be sent refuses the request (the gate reads it as the answer starts)."""
    scope.setdefault("state", {})[_STATE] = refusal


def told(scope: MutableMapping[str, Any]) -> Refusal | None:
    refusal = scope.get("state", {}).get(_STATE)
    return refusal if isinstance(refusal, Refusal) else None


Append = Callable[[dict[str, Any], str | None], Awaitable[None]]
"""Append one audit payload, recorded with the principal (`token:<name>`, or None)."""


@dataclass
class _Window:
    opened: float
    since: str
    count: int = 0  # refusals after the first, not written yet
    requests: list[str] = field(default_factory=list)
    attempts: list[str] = field(default_factory=list)

    def note(self, request: str, attempt: str | None) -> None:
        self.count += 1
        if request not in self.requests and len(self.requests) < MAX_LISTED:
            self.requests.append(request)
        if attempt is not None and attempt not in self.attempts and len(self.attempts) < MAX_LISTED:
            self.attempts.append(attempt)


_Key = tuple[int, str, str, str | None]


class RefusalAudit:
    """Audit events of refusals, aggregated per (status, reason, source, principal) and `window_s`."""

    def __init__(
        self,
        append: Append,
        window_s: float = AUDIT_WINDOW_S,
        max_keys: int = MAX_AUDIT_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.append = append
        self.window_s = window_s
        self.max_keys = max_keys
        self.clock = clock
        self._open: dict[_Key, _Window] = {}

    async def refused(self, status: int, refusal: Refusal, method: str, path: str, source: str) -> None:
        """Count one refusal; the first of its window is written at once."""
        request = f"{method} {_printable(path)}"
        key: _Key = (status, refusal.reason, source, refusal.principal)
        if key not in self._open and len(self._open) >= self.max_keys:
            key = (status, refusal.reason, "*", None)
        now = self.clock()
        window = self._open.get(key)
        if window is not None and now - window.opened < self.window_s:
            window.note(request, refusal.attempt)
            return
        self._open[key] = _Window(now, utc_timestamp())  # before any await: a refusal meanwhile counts in it
        if window is not None and window.count:
            await self._write(key, window)
        first = _Window(now, self._open[key].since)
        first.note(request, refusal.attempt)
        await self._write(key, first)

    async def flush(self, everything: bool = False) -> None:
        """Write the count of every window that ended (`everything`: of every window), and close them."""
        now = self.clock()
        for key, window in list(self._open.items()):
            if everything or now - window.opened >= self.window_s:
                del self._open[key]
                if window.count:
                    await self._write(key, window)

    async def flushing(self, stop: asyncio.Event) -> None:
        """Write the counts of ended windows every `window_s` until `stop`, then those of every window."""
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.window_s)
                await self.flush()
        finally:
            await self.flush(everything=True)

    async def _write(self, key: _Key, window: _Window) -> None:
        status, reason, source, principal = key
        payload: dict[str, Any] = {
            "status": status,
            "reason": reason,
            "source": source,
            "count": window.count,
            "requests": window.requests,
            "since": window.since,
            "window_s": self.window_s,
        }
        if window.attempts:
            payload["attempts"] = window.attempts
        if principal is not None:
            payload["principal"] = principal
        try:
            await self.append(payload, f"token:{principal}" if principal is not None else None)
        except Exception:  # the caller still gets its answer; the gap shows in the server log
            log.exception("could not append the audit event of %d %s from %s", status, reason, source)


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else "?" for c in text[:_PATH_CHARS])
