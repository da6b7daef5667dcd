"""The page and its files: a fixed manifest of packaged files, nothing else is ever read from disk."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Final

from starlette.requests import Request
from starlette.responses import Response

from gateway.access.refusals import LOGIN_FORM, failed, tell_gate, told
from gateway.access.tokens import TokenBook
from gateway.web.auth import SECURITY_HEADERS, forget_cookie, login_page, principal_of

STATIC: Final = files("gateway.web") / "static"
MANIFEST: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
    "vendor/d3.min.js": "text/javascript; charset=utf-8",
}
"""`/ui/static/<name>`: every file the page may load, and its type. Any other name is a 404."""
INDEX: Final = "index.html"
_cache: dict[str, bytes] = {}


async def packaged(name: str) -> bytes:
    """A packaged static file's bytes (read once, off the event loop)."""
    if name not in _cache:
        _cache[name] = await asyncio.to_thread((STATIC / name).read_bytes)
    return _cache[name]


def page_routes(book: TokenBook) -> dict[str, Callable[[Request], Awaitable[Response]]]:
    """Path -> endpoint of the page and its static files."""

    async def index(request: Request) -> Response:
        if await principal_of(request, book) is None:
            if told(request.scope) == failed(None):
                tell_gate(request.scope, LOGIN_FORM)  # the form, to a caller who tried nothing
                return login_page()
            # A stale cookie (a revoked token) is one failed attempt, not one per visit until it blocks.
            return forget_cookie(login_page())
        body = await packaged(INDEX)
        return Response(body, headers=SECURITY_HEADERS, media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        kind = MANIFEST.get(name)
        if kind is None:
            return Response("not found", 404, SECURITY_HEADERS, media_type="text/plain")
        if await principal_of(request, book) is None:
            return Response("authorization: log in at /ui", 401, SECURITY_HEADERS, media_type="text/plain")
        headers = {**SECURITY_HEADERS, "Cache-Control": "private, max-age=300"}
        return Response(await packaged(name), headers=headers, media_type=kind)

    return {"/ui": index, "/ui/static/{name:path}": static}
