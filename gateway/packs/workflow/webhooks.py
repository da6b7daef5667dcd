"""`POST /webhooks/github`: GitHub webhook deliveries recorded as workflow events, on the HTTP gateway.

Mounted through the gateway's `eventloom.http_routes` plug-in point (`routes`). The route authenticates a
delivery by its `X-Hub-Signature-256` (`sha256=` and the hex HMAC-SHA256 of the raw body under the shared
secret), checked before anything is parsed, so no bearer token is needed. The secret is the variable
`EVENTLOOM_GITHUB_WEBHOOK_SECRET`, else the first line of `<data dir>/github-webhook.secret` (a file only its
owner may read: mode 0600; a file others may read is refused); it is read on each delivery, so it can be set
or rotated without a restart. A node started detached (`eventloom up --detach`) passes on only its own
settings, so give it the secret in the file.

Answers (only a 200 for a delivery first seen writes anything):
- 200: recorded (or recorded before, by any delivery of the same change: `"duplicate": true`), or a `ping`.
- 202: an event or action the pack does not record (`"ignored"` says which).
- 400: no `X-GitHub-Event` or `X-GitHub-Delivery`, a body that is not JSON, or one that maps to an invalid
  payload (the message names the field: the GitHub one, or the event's).
- 401: a missing or wrong signature; a failed attempt of the address, audited (`gateway.mcp.gate`): 429
  instead once the address is over the limit. A delivery with a valid signature is never refused for it.
- 413: a body over the gateway's limit.
- 503: no secret is configured (the operator's to fix; GitHub may redeliver once it is), or the log is
  unavailable.

Idempotent on the content, not on the delivery header (which the signature does not cover): each event is
appended with the idempotency key `github:<item>:<digest>`, where item is the GitHub object the delivery
changes (`issue-<id>`, `pr-<id>`, `comment-<id>`, `review-<id>`) and digest is the SHA-256 of which change
(the action, and the object's `updated_at` unless it is an opening or a review's submission), the event's
place in the delivery and what it records (type, actor, payload). So a redelivery (GitHub's "Redeliver", a
retry after a timeout), the same signed body replayed under a new `X-GitHub-Delivery`, or the same change
delivered in another body (a second hook on the organisation) writes nothing new and answers 200 with the
events first written and `"duplicate": true`; one that had failed halfway writes only what was missing.
The keys live in the log's idempotency records (`EVENTLOOM_IDEMPOTENCY`, no expiry), so this holds across
restarts and gateways, with no window to outlast. Every event of a delivery is validated before any is
appended. The answer:
`{"delivery": D, "event": "issues.opened", "events": [{type, session, seq, citation}], "duplicate": bool}`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any, Final

import msgspec
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from eventloom.errors import EventloomError, EventValidationError
from eventloom.event import Event, utc_timestamp
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from gateway.access.backend import Backend
from gateway.access.refusals import Refusal, tell_gate
from gateway.packs.workflow.github_events import DeliveryError, Ignored, Mapped, map_delivery

log = logging.getLogger(__name__)
WEBHOOK_PATH: Final = "/webhooks/github"
SECRET_ENV: Final = "EVENTLOOM_GITHUB_WEBHOOK_SECRET"  # noqa: S105 (the variable's name)
SECRET_FILE: Final = "github-webhook.secret"  # noqa: S105 (a file name)
PRINCIPAL: Final = "webhook:github"
"""Recorded as each event's `principal`: what authenticated it (the signature, not a token)."""
_DELIVERY: Final = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_decoder = msgspec.json.Decoder()


def routes(settings: Settings, backend: Backend) -> list[Route]:
    """Entry point `eventloom.http_routes`: the GitHub webhook route on `backend`'s log."""

    async def github(request: Request) -> JSONResponse:
        return await receive_delivery(request, settings, backend)

    return [Route(WEBHOOK_PATH, github, methods=["POST"], name="github_webhook")]


def secret_file(settings: Settings) -> Path:
    return settings.data_dir / SECRET_FILE


def webhook_secret(settings: Settings) -> bytes | None:
    """The configured secret (the variable, else the private file), or None when there is none."""
    if secret := os.environ.get(SECRET_ENV, "").strip():
        return secret.encode()
    path = secret_file(settings)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_IMODE(mode) & 0o077:
        log.error("%s may be read by others (mode %o): refusing it; chmod 600 it", path, stat.S_IMODE(mode))
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].strip().encode() if lines and lines[0].strip() else None


def signature_matches(secret: bytes, body: bytes, header: str | None) -> bool:
    """Whether `header` is `sha256=<hex HMAC-SHA256 of body under secret>` (compared in constant time)."""
    if header is None or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode("utf-8", "replace"))


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}, **extra}, status_code=status)


async def receive_delivery(request: Request, settings: Settings, backend: Backend) -> JSONResponse:
    """Check, map, validate and append one delivery; the module docstring gives the answers."""
    body = await request.body()
    secret = await asyncio.to_thread(webhook_secret, settings)
    if secret is None:
        where = f"set {SECRET_ENV} or write it to {secret_file(settings)} (mode 0600)"
        return _error(503, "unavailable", f"no GitHub webhook secret is configured: {where}")
    if not signature_matches(secret, body, request.headers.get("x-hub-signature-256")):
        missing = "x-hub-signature-256" not in request.headers
        message = "X-Hub-Signature-256: " + ("missing" if missing else "does not match the body and secret")
        tell_gate(request.scope, Refusal(reason="bad_signature"))
        return _error(401, "unauthorized", message)
    event = request.headers.get("x-github-event", "")
    delivery = request.headers.get("x-github-delivery", "")
    if not event:
        return _error(400, "invalid_input", "X-GitHub-Event: missing")
    if not _DELIVERY.fullmatch(delivery):
        return _error(400, "invalid_input", "X-GitHub-Delivery: must be 1-128 of A-Z a-z 0-9 . _ -")
    if event == "ping":
        return JSONResponse({"delivery": delivery, "event": "ping", "events": [], "duplicate": False})
    try:
        mapped = map_delivery(event, _decoder.decode(body))
    except msgspec.DecodeError as exc:
        return _error(400, "invalid_input", f"body: not JSON ({exc}); send the webhook as application/json")
    except DeliveryError as exc:
        return _error(400, "invalid_input", str(exc), delivery=delivery)
    if isinstance(mapped, Ignored):
        answer = {"delivery": delivery, "event": mapped.what, "events": [], "duplicate": False}
        return JSONResponse({**answer, "ignored": mapped.reason}, status_code=202)
    try:
        requests = _requests(mapped)
    except EventValidationError as exc:
        return _error(400, "invalid_input", str(exc), delivery=delivery)
    started = utc_timestamp()
    try:
        events = await backend.log.append_many(requests)
    except EventloomError as exc:
        log.warning("delivery %s (%s) not recorded: %s", delivery, mapped.what, exc)
        return _error(503, "unavailable", f"the log did not take the events: {exc}", delivery=delivery)
    return JSONResponse(_answer(delivery, mapped.what, events, started))


def content_key(mapped: Mapped, index: int) -> str:
    """The idempotency key of the delivery's `index`-th event: the change and what it records, never the
    delivery header."""
    event_type, payload = mapped.events[index]
    content = msgspec.json.encode([mapped.version, index, event_type, mapped.actor, payload])
    return f"github:{mapped.item}:{hashlib.sha256(content).hexdigest()[:32]}"


def _requests(mapped: Mapped) -> list[AppendRequest]:
    """Every event of the delivery as a validated append request (all checked before any is appended)."""
    requests: list[AppendRequest] = []
    for index, (event_type, payload) in enumerate(mapped.events):
        request = AppendRequest(
            session=mapped.session,
            type=event_type,
            actor=mapped.actor,
            payload=payload,
            idempotency_key=content_key(mapped, index),
            principal=PRINCIPAL,
        )
        try:
            requests.append(request.validated())
        except EventValidationError as exc:
            raise EventValidationError(f"{event_type} {exc.field}", exc.reason) from None
    return requests


def _answer(delivery: str, what: str, events: list[Event], started: str) -> dict[str, Any]:
    return {
        "delivery": delivery,
        "event": what,
        "events": [
            {"type": e.type, "session": e.session, "seq": e.seq, "citation": e.citation} for e in events
        ],
        # Every event was written before this request arrived: by an earlier delivery of the same change.
        "duplicate": all(e.ts < started for e in events),
    }
