"""Who is asking the web view: the gateway's bearer tokens, presented as a header or as a login cookie.

A script sends `Authorization: Bearer <token>`; a browser logs in once through the form `/ui` shows
without a token, and `POST /ui/login` puts the token in an HttpOnly, SameSite=Strict cookie scoped to the
gateway's origin, so the page's own requests carry it and no script can read it. Tokens are looked up in
the same `TokenBook` as MCP's (constant time), with the same session patterns.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
from typing import Final
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gateway.access.refusals import Refusal, failed, tell_gate
from gateway.access.tokens import Principal, TokenBook, bearer_token

COOKIE: Final = "eventloom_token"
UI_PATH: Final = "/ui"
MAX_LOGIN_BYTES: Final = 4096
CSP: Final = "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",  # "no-referrer" makes a form post say `Origin: null`
    "Cache-Control": "no-store",
}
_LOGIN_STYLE: Final = (
    "body{font:15px system-ui,sans-serif;background:#0f1419;color:#e6e6e6;display:grid;place-items:center;"
    "height:100vh;margin:0}form{background:#1a2029;padding:2em;border-radius:10px;min-width:22em;"
    "box-shadow:0 4px 24px #0008}h1{font-size:1.3em;margin:0 0 .3em}p{color:#9aa5b1;margin:0 0 1.2em}"
    "input{width:100%;box-sizing:border-box;padding:.6em;border-radius:6px;border:1px solid #334;"
    "background:#0f1419;color:inherit;font:inherit}button{margin-top:1em;padding:.6em 1.4em;border:0;"
    "border-radius:6px;background:#4c8bf5;color:#fff;font:inherit;cursor:pointer}.error{color:#ff8a80}"
)
_LOGIN_STYLE_HASH: Final = base64.b64encode(hashlib.sha256(_LOGIN_STYLE.encode()).digest()).decode()
LOGIN_CSP: Final = f"{CSP}; style-src 'sha256-{_LOGIN_STYLE_HASH}'; img-src data:"


async def principal_of(request: Request, book: TokenBook) -> Principal | None:
    """The principal of the request's bearer token, else of its login cookie. None: neither is valid, and
    the gate is told why (`gateway.access.refusals`), for the 401 the caller answers."""
    token = bearer_token(request.headers.get("authorization")) or request.cookies.get(COOKIE)
    principal = await asyncio.to_thread(book.principal, token) if token else None
    if principal is None:
        tell_gate(request.scope, failed(token))
    return principal


def login_page(message: str | None = None, status: int = 401) -> Response:
    """The page `/ui` answers without a valid token: a form that posts the token to `/ui/login`."""
    problem = f'<p class="error" id="login-error">{html.escape(message)}</p>' if message else ""
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Eventloom - log in</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,"><style>{_LOGIN_STYLE}</style></head>
<body><form method="post" action="{UI_PATH}/login" id="login">
<h1>Eventloom memory</h1><p>Paste a gateway token (<code>eventloom tokens add</code>) to open the view.</p>
{problem}<input type="password" name="token" id="token" autocomplete="current-password"
placeholder="elt_..." required autofocus><button type="submit">Open</button></form></body></html>
"""
    headers = {**SECURITY_HEADERS, "Content-Security-Policy": LOGIN_CSP}
    if status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="eventloom"'
    return HTMLResponse(body, status_code=status, headers=headers)


def same_origin(request: Request) -> bool:
    """A form posted from this gateway's own page (or by a client that sends no Origin)."""
    origin = request.headers.get("origin")
    return origin is None or origin == f"{request.url.scheme}://{request.headers.get('host', '')}"


async def login(request: Request, book: TokenBook) -> Response:
    """`POST /ui/login` with the form field `token`: a valid one sets the cookie and goes to `/ui`."""
    if not same_origin(request):
        tell_gate(request.scope, Refusal(reason="foreign_origin"))
        return login_page("This form only accepts posts from the gateway's own page.", status=403)
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_LOGIN_BYTES:
            return login_page("token: too long to be a gateway token.", status=400)
    token = (parse_qs(body.decode("utf-8", "replace")).get("token") or [""])[0].strip()
    principal = await asyncio.to_thread(book.principal, token) if token else None
    if principal is None:
        tell_gate(request.scope, failed(token))
        return login_page("token: not a valid gateway token." if token else "token: missing.")
    response = RedirectResponse(UI_PATH, status_code=303, headers=SECURITY_HEADERS)
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/",
        secure=request.url.scheme == "https",
    )
    return response


async def logout(request: Request) -> Response:
    """`GET /ui/logout`: forget the cookie, back to the login form."""
    return forget_cookie(RedirectResponse(UI_PATH, status_code=303, headers=SECURITY_HEADERS))


def forget_cookie(response: Response) -> Response:
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
    return response
