"""What the recorder (`recorder`) and the MCP recording tools (`mcp_tools`) share, so a run recorded
either way is the same events: the session a run defaults to, the idempotency key of each item, the
payload of each event and the one append that writes it.

Every event of a run is appended with the idempotency key `workflow:<run id>:<item>`, the item being the
event's kind and the id it defines (`message:<id>`, `call:<id>`, `plan:<id>`, `run:started`...): a call
retried after a timeout returns the event the first try appended instead of appending it again, and an
id recorded before with a different payload is refused (`AlreadyRecorded`, naming the id's field).
"""

from __future__ import annotations

import hashlib
import logging
import re
import uuid
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

import msgspec

from eventloom.errors import EventValidationError, IdempotencyConflictError
from eventloom.event import SESSION_PATTERN, Event
from eventloom.log import EventLog
from eventloom.request import MAX_IDEMPOTENCY_KEY
from gateway.packs.workflow import events as ev

log = logging.getLogger(__name__)
S = TypeVar("S", bound=msgspec.Struct)
MAX_ERROR_CHARS: Final = 10_000
SESSION_PREFIX: Final = "workflow-"
KEY_PREFIX: Final = "workflow"
_NOT_SESSION_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")

EVENT_TYPES: Final[dict[type[msgspec.Struct], str]] = {
    schema: name for name, schema in ev.WORKFLOW_EVENT_TYPES.items()
}


class AlreadyRecorded(EventValidationError):
    """An id this run (or session) already recorded, then with another payload: nothing is appended."""


def new_run_id() -> str:
    return f"run-{uuid.uuid4().hex}"


def fresh_id(run_id: str, kind: str) -> str:
    """An id nobody gave (an MCP caller that passed none): unique, but a retry makes another one."""
    return f"{run_id[:200]}-{kind}-{uuid.uuid4().hex[:16]}"


def session_for(run_id: str) -> str:
    """The session a run's events go in when none is named: `workflow-<run id>`, with characters a session
    name cannot hold replaced and a digest of the id appended when that changed or shortened it."""
    name = SESSION_PREFIX + run_id
    if SESSION_PATTERN.fullmatch(name):
        return name
    digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
    cleaned = _NOT_SESSION_CHARS.sub("_", run_id)[: 128 - len(SESSION_PREFIX) - len(digest) - 1]
    return f"{SESSION_PREFIX}{cleaned}-{digest}"


def idempotency_key(scope: str, item: str) -> str:
    """`workflow:<scope>:<item>` (the scope is the run id), or its digest when that is too long or holds
    characters a key cannot."""
    key = f"{KEY_PREFIX}:{scope}:{item}"
    if len(key) <= MAX_IDEMPOTENCY_KEY and key.isprintable():
        return key
    digest = hashlib.sha256(f"{scope}\x00{item}".encode()).hexdigest()
    return f"{KEY_PREFIX}:sha256:{digest}"


def build(schema: type[S], **fields: Any) -> S:
    """A payload Struct, its own checks (a result's error without `is_error`...) raised as
    `EventValidationError` of `payload`; the field constraints are checked when it is appended."""
    try:
        return schema(**fields)
    except (TypeError, ValueError) as exc:
        raise EventValidationError("payload", str(exc)) from None


def payload_of(payload: msgspec.Struct) -> dict[str, Any]:
    """The event payload of a payload Struct: its fields as JSON values, leaving out those that are None."""
    values: dict[str, Any] = msgspec.to_builtins(payload)
    return {name: value for name, value in values.items() if value is not None}


async def record(
    log: EventLog,
    session: str,
    actor: str,
    payload: msgspec.Struct,
    *,
    scope: str,
    item: str,
    field: str,
    principal: str | None = None,
    ignore: frozenset[str] = frozenset(),
) -> Event:
    """Append `payload` as its event type under the item's idempotency key; the event the first try
    appended if this is a retry. `field` names the id at fault when the item was recorded differently
    (payload fields in `ignore`, such as a time taken when the call was made, may differ)."""
    event_type = EVENT_TYPES[type(payload)]
    body = payload_of(payload)
    try:
        event = await log.append(
            session,
            event_type,
            actor,
            body,
            idempotency_key=idempotency_key(scope, item),
            principal=principal,
        )
    except IdempotencyConflictError as exc:
        event = exc.recorded  # the appender compares every field; a recorder retry may differ in `ignore`
    if event.type != event_type or _without(event.payload, ignore) != _without(body, ignore):
        raise AlreadyRecorded(
            field,
            f"{item.split(':', 1)[-1]!r} was already recorded in session {session!r} "
            f"({event.citation}, a {event.type}) with a different payload; give a new id",
        )
    return event


def issue_key(issue: str | int, repository: str | None, field: str = "issue") -> str:
    """`owner/name#number` from a key or from a number in `repository`; a ValueError naming `field`."""
    if isinstance(issue, bool) or not isinstance(issue, (str, int)):
        raise EventValidationError(field, "must be owner/name#number or a number")
    if isinstance(issue, int):
        if repository is None:
            raise EventValidationError(
                field, f"a bare number ({issue}) needs the recorder's `repository` (owner/name)"
            )
        issue = f"{repository}#{issue}"
    if ev.ITEM_KEY.fullmatch(issue) is None:
        raise EventValidationError(field, f"{issue!r} is not owner/name#number")
    return issue


def _without(payload: dict[str, Any], ignore: frozenset[str]) -> dict[str, Any]:
    return {name: value for name, value in payload.items() if name not in ignore}


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


def hash_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


async def finish_after(original: BaseException, recording: Awaitable[object]) -> None:
    """Record the end of what `original` interrupted; if that fails too, log it and let `original` go on."""
    try:
        await recording
    except Exception:
        log.exception("could not record the end of a workflow item after %s", type(original).__name__)
