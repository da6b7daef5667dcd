"""The web view: a read-only page of the memory graph, its timeline and its peers, on the HTTP gateway.

`web_routes` gives the routes the gateway serves beside MCP: `/ui` (the page, or a login form),
`/ui/login`, `/ui/logout`, `/ui/static/<file>` (a fixed manifest of packaged files) and the JSON API
under `/v1`. They authenticate themselves with the gateway's tokens (a bearer header, or the cookie the
login form sets), so the gateway lets them through its bearer gate, which counts their failed attempts and
audits their refusals from what they tell it (`gateway.access.refusals`). See docs/ui.md.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.access.backend import Backend
from gateway.access.tokens import TokenBook
from gateway.web.api import ApiHandlers, endpoint
from gateway.web.auth import login, logout
from gateway.web.pages import page_routes


def web_routes(backend: Backend, book: TokenBook, wait_s: Callable[[str], float]) -> list[Route]:
    """Every route of the web view; `wait_s(token_name)` is the gateway's rate limit (0: go ahead)."""

    async def logging_in(request: Request) -> Response:
        return await login(request, book)

    routes = [Route(path, page, methods=["GET"]) for path, page in page_routes(book).items()]
    routes += [
        Route("/ui/login", logging_in, methods=["POST"]),
        Route("/ui/logout", logout, methods=["GET"]),
    ]
    routes += [
        Route(path, endpoint(book, wait_s, handler), methods=["GET"])
        for path, handler in ApiHandlers(backend).by_path().items()
    ]
    return routes


__all__ = ["web_routes"]
