"""The web view's JSON API (`/v1/...`), read-only, scoped to the sessions the caller's token may touch.

Every answer is JSON; a refusal is `{"error": {"code", "message"}}` whose message starts with the
parameter it is about: 400 `invalid_input` (a bad parameter), 401 `unauthorized`, 403 `forbidden` (a
session the token may not touch, or the peers for an agent token), 404 `not_found`, 429 `rate_limited`,
503 `unavailable`. The gateway audits each 401, 403 and 429 (`gateway.access.refusals`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from eventloom.errors import EventValidationError
from eventloom.event import SESSION_PATTERN
from eventloom.position import Position
from eventloom.reading import SEE_QUARANTINE
from gateway.access.backend import Backend
from gateway.access.refusals import Refusal, tell_gate
from gateway.access.scope import OutOfScopeError, cut_to_scope
from gateway.access.tokens import Principal, TokenBook
from gateway.web.auth import SECURITY_HEADERS, principal_of
from gateway.web.log_reads import one_event, peers, sessions, timeline
from gateway.web.views import view_graph
from readmodels.consistency import DEFAULT_AFTER_WAIT_MS, MAX_AFTER_WAIT_MS
from readmodels.graph.model import canonical_ts
from readmodels.query.protocol import MemoryUnavailableError
from readmodels.retrieval.model import QueryError
from readmodels.view import MAX_VIEW_LIMIT, ViewRequest

MAX_TIMELINE: Final = 5000
MAX_SEARCH_CHARS: Final = 200
Handler = Callable[[Request, Principal], Awaitable[Any]]
Limit = Callable[[str], float]


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code = status, code


def bad(message: str) -> ApiError:
    return ApiError(400, "invalid_input", message)


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    body = msgspec.json.encode({"error": {"code": code, "message": message}})
    return Response(body, status, {**SECURITY_HEADERS, **(headers or {})}, media_type="application/json")


def endpoint(book: TokenBook, wait_s: Limit, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """`handler` behind the token check and the per-token rate, its answer as JSON, its refusals too."""

    async def answer(request: Request) -> Response:
        principal = await principal_of(request, book)
        if principal is None:
            auth = {"WWW-Authenticate": 'Bearer realm="eventloom"'}
            message = "authorization: a valid bearer token or login is required"
            return error(401, "unauthorized", message, auth)
        wait = wait_s(principal.name)
        if wait > 0:
            tell_gate(request.scope, Refusal(reason="rate_limited", principal=principal.name))
            retry = {"Retry-After": str(max(1, math.ceil(wait)))}
            return error(429, "rate_limited", f"rate: token {principal.name!r} is calling too fast", retry)
        try:
            result = await handler(request, principal)
            if not principal.unrestricted:  # the second gate: the rows the answer carries
                result = cut_to_scope(msgspec.to_builtins(result), principal.may_touch)
        except OutOfScopeError as exc:
            return error(403, "forbidden", str(exc))
        except ApiError as exc:
            tell_gate(request.scope, Refusal(reason=exc.code, principal=principal.name))
            return error(exc.status, exc.code, str(exc))
        except QueryError as exc:
            return error(400, "invalid_input", str(exc))
        except MemoryUnavailableError as exc:
            return error(503, "unavailable", str(exc))
        return Response(msgspec.json.encode(result), headers=SECURITY_HEADERS, media_type="application/json")

    return answer


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise bad(f"{name}: expected a whole number, got {text[:40]!r}") from None
    if not low <= value <= high:
        raise bad(f"{name}: must be between {low} and {high}, got {value}")
    return value


def as_of_param(request: Request) -> str | None:
    text = request.query_params.get("as_of") or None
    if text is None:
        return None
    try:
        return canonical_ts(text)
    except ValueError:
        raise bad(f"as_of: expected an RFC 3339 timestamp, got {text[:40]!r}") from None


def after_param(request: Request, principal: Principal) -> Position | None:
    """`after=SESSION/SEQ`: the read answers once the read models have applied that event (read your own
    writes); a session the token may not touch is refused like any other."""
    text = request.query_params.get("after") or None
    if text is None:
        return None
    try:
        position = Position.parse(text[:200], "after")
    except EventValidationError as exc:
        raise bad(str(exc)) from None
    touchable(principal, position.session)
    return position


def session_name(text: str, name: str = "session") -> str:
    if not SESSION_PATTERN.fullmatch(text):
        raise bad(f"{name}: not a session id: {text[:40]!r}")
    return text


def touchable(principal: Principal, session: str) -> str:
    if not principal.may_touch(session):
        raise ApiError(403, "forbidden", f"session: this token may not touch session {session!r}")
    return session


async def scope(backend: Backend, principal: Principal, request: Request) -> list[str] | None:
    """The sessions a graph question covers: the one asked for (if the token may touch it), else every
    session the token may touch (None: every session, for an unrestricted token)."""
    asked = request.query_params.get("session") or None
    if asked is not None:
        return [touchable(principal, session_name(asked))]
    if principal.unrestricted:
        return None
    return [info.session for info in await sessions(backend.log) if principal.may_touch(info.session)]


class ApiHandlers:
    """The `/v1` endpoints over one backend: each takes the request and the caller's principal."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    async def graph_nodes(self, request: Request, principal: Principal) -> Any:
        search = request.query_params.get("search") or None
        if search is not None and len(search) > MAX_SEARCH_CHARS:
            raise bad(f"search: longer than {MAX_SEARCH_CHARS} characters")
        view = ViewRequest(
            sessions=await scope(self.backend, principal, request),
            search=search,
            as_of=as_of_param(request),
            limit=int_param(request, "limit", 200, 1, MAX_VIEW_LIMIT),
            after=after_param(request, principal),
            after_wait_ms=int_param(request, "after_wait_ms", DEFAULT_AFTER_WAIT_MS, 0, MAX_AFTER_WAIT_MS),
        )
        return await view_graph(self.backend.memory, self.backend.log.client, view, principal)

    async def graph_neighbourhood(self, request: Request, principal: Principal) -> Any:
        node = request.query_params.get("node") or ""
        if not node or len(node) > 512:
            raise bad("node: expected a node id (or an entity's name) of 1 to 512 characters")
        view = ViewRequest(
            sessions=await scope(self.backend, principal, request),
            focus=node,
            depth=int_param(request, "depth", 1, 1, 3),
            as_of=as_of_param(request),
            limit=int_param(request, "limit", 200, 1, MAX_VIEW_LIMIT),
            after=after_param(request, principal),
            after_wait_ms=int_param(request, "after_wait_ms", DEFAULT_AFTER_WAIT_MS, 0, MAX_AFTER_WAIT_MS),
        )
        return await view_graph(self.backend.memory, self.backend.log.client, view, principal)

    async def timeline_of(self, request: Request, principal: Principal) -> Any:
        asked = request.query_params.get("session")
        if not asked:
            raise bad("session: required")
        session = touchable(principal, session_name(asked))
        from_seq = int_param(request, "from_seq", 1, 1, 2**62)
        limit = int_param(request, "limit", 1000, 1, MAX_TIMELINE)
        return await timeline(self.backend.log, session, from_seq, limit)

    async def event(self, request: Request, principal: Principal) -> Any:
        session = touchable(principal, session_name(request.path_params["session"]))
        text = request.path_params["seq"]
        if not text.isdigit() or int(text) < 1:
            raise bad(f"seq: expected a whole number from 1, got {text[:40]!r}")
        found = await one_event(self.backend.log, session, int(text))
        if found is None:
            # A forgery claims a seq and raw bytes take a stream sequence, but neither is an event: the
            # caller who asked for one by that number is told where it went.
            missing = f"seq: session {session!r} has no event {int(text)}"
            why = f"a message on its subject that is not an event has no seq: {SEE_QUARANTINE}"
            raise ApiError(404, "not_found", f"{missing} ({why})")
        return found

    async def session_list(self, request: Request, principal: Principal) -> Any:
        known = await sessions(self.backend.log)
        return {"sessions": [info for info in known if principal.may_touch(info.session)]}

    async def peer_list(self, request: Request, principal: Principal) -> Any:
        """Admins only: the peers' hosts, pids and URLs map the deployment."""
        if principal.role != "admin":
            raise ApiError(403, "forbidden", f"peers: needs an admin token; {principal.name!r} is an agent")
        return await peers(self.backend.log)

    async def me(self, request: Request, principal: Principal) -> Any:
        return {"name": principal.name, "role": principal.role, "sessions": list(principal.sessions)}

    def by_path(self) -> dict[str, Handler]:
        """Path -> handler of every `/v1` endpoint."""
        return {
            "/v1/graph/nodes": self.graph_nodes,
            "/v1/graph/neighbourhood": self.graph_neighbourhood,
            "/v1/timeline": self.timeline_of,
            "/v1/events/{session}/{seq}": self.event,
            "/v1/sessions": self.session_list,
            "/v1/peers": self.peer_list,
            "/v1/me": self.me,
        }
