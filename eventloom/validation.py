"""Checks every append passes before anything is hashed, signed or published."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final, TypeVar

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import HASH_PATTERN, SESSION_PATTERN, TYPE_PATTERN
from eventloom.schemas import validate_payload
from eventloom.schemas.registry import UNKNOWN_ORIGIN, Origin

T = TypeVar("T")
MAX_PAYLOAD_BYTES: Final = 1024 * 1024
MAX_ACTOR_CHARS: Final = 256
MAX_CAUSED_BY: Final = 256
MAX_DEPTH: Final = 64
INT_MIN: Final = -(2**63)
INT_MAX: Final = 2**63 - 1

_size_encoder = msgspec.json.Encoder()


def validate_session(session: object) -> str:
    if not isinstance(session, str) or not SESSION_PATTERN.fullmatch(session):
        raise EventValidationError("session", "must match ^[A-Za-z0-9_-]{1,128}$")
    return session


def validate_type(event_type: object) -> str:
    if not isinstance(event_type, str) or not TYPE_PATTERN.fullmatch(event_type):
        raise EventValidationError(
            "type", "must be dotted snake_case with at least two parts, e.g. task.completed"
        )
    return event_type


def validate_actor(actor: object) -> str:
    if not isinstance(actor, str) or not actor.strip():
        raise EventValidationError("actor", "must be a non-empty string")
    if len(actor) > MAX_ACTOR_CHARS:
        raise EventValidationError("actor", f"longer than {MAX_ACTOR_CHARS} characters")
    _check_string("actor", actor)
    if any(ch < " " for ch in actor):
        raise EventValidationError("actor", "must not contain control characters")
    return actor


def validate_caused_by(caused_by: object) -> list[str]:
    if not isinstance(caused_by, list):
        raise EventValidationError("caused_by", "must be a list of event hashes")
    if len(caused_by) > MAX_CAUSED_BY:
        raise EventValidationError("caused_by", f"more than {MAX_CAUSED_BY} entries")
    for index, item in enumerate(caused_by):
        if not isinstance(item, str) or not HASH_PATTERN.fullmatch(item):
            raise EventValidationError(f"caused_by[{index}]", "must be a 64-character lowercase hex sha256")
    return list(caused_by)


def validate_payload_value(
    event_type: str, payload: object, origin: Origin = UNKNOWN_ORIGIN
) -> dict[str, Any]:
    """Shape, JSON-safety, size and schema of a payload (`origin`: its event's session and actor)."""
    if not isinstance(payload, dict):
        raise EventValidationError("payload", "must be a JSON object")
    _check_json_value("payload", payload, 0)
    size = len(_size_encoder.encode(payload))
    if size > MAX_PAYLOAD_BYTES:
        raise EventValidationError("payload", f"encodes to {size} bytes, over the {MAX_PAYLOAD_BYTES} limit")
    validate_payload(event_type, payload, origin)
    return payload


def _check_json_value(path: str, value: object, depth: int) -> None:
    """Walk a JSON tree without recursion; leaf checks are inlined because this runs on every append."""
    stack: list[tuple[str, object, int]] = [(path, value, depth)]
    while stack:
        where, node, level = stack.pop()
        if level > MAX_DEPTH:
            raise EventValidationError(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            items: Iterable[tuple[object, object]] = node.items()
            for key, item in items:
                if not isinstance(key, str):
                    raise EventValidationError(where, f"object key {key!r} is not a string")
                _check_string(f"{where}.{key}", key)
                if not _leaf_ok(item):
                    _push_or_fail(stack, f"{where}.{key}", item, level + 1)
        elif isinstance(node, list):
            for index, item in enumerate(node):
                if not _leaf_ok(item):
                    _push_or_fail(stack, f"{where}[{index}]", item, level + 1)
        elif not _leaf_ok(node):
            _push_or_fail(stack, where, node, level, leaf_only=True)


def _leaf_ok(value: object) -> bool:
    """True for a valid scalar; False for a container (to walk) or an invalid scalar (to report)."""
    kind = type(value)
    if kind is str:
        text: str = value  # type: ignore[assignment]
        return "\x00" not in text and (text.isascii() or _utf8_ok(text))
    if kind is int:
        return INT_MIN <= value <= INT_MAX  # type: ignore[operator]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    return value is None or kind is bool


def _push_or_fail(
    stack: list[tuple[str, object, int]], path: str, value: object, depth: int, *, leaf_only: bool = False
) -> None:
    if not leaf_only and isinstance(value, (dict, list)):
        stack.append((path, value, depth))
        return
    if isinstance(value, str):
        _check_string(path, value)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        raise EventValidationError(path, "integer outside the signed 64-bit range")
    elif isinstance(value, float):
        raise EventValidationError(path, "NaN and infinity are not valid JSON numbers")
    elif not isinstance(value, (dict, list)):
        raise EventValidationError(path, f"{type(value).__name__} is not a JSON value")


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_string(path: str, value: str) -> None:
    if "\x00" in value:
        raise EventValidationError(path, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise EventValidationError(path, "is not valid Unicode (lone surrogate)") from None


def decode_json_input(data: bytes | str, field: str, into: type[T]) -> T:
    """JSON from outside (an argument, a file line) as `into`, or an EventValidationError naming `field`:
    bytes that are not UTF-8, an argument with undecodable bytes, malformed or too deeply nested JSON, a
    wrong shape. Never a traceback."""
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:  # argv bytes Python could not decode arrive as lone surrogates
            raise EventValidationError(field, "is not valid UTF-8 (undecodable bytes)") from None
    try:
        return msgspec.json.decode(data, type=into)
    except UnicodeDecodeError:
        raise EventValidationError(field, "is not valid UTF-8") from None
    except RecursionError:
        raise EventValidationError(field, f"nested deeper than {MAX_DEPTH} levels") from None
    except msgspec.ValidationError as exc:
        raise EventValidationError(field, str(exc)) from None
    except msgspec.DecodeError as exc:
        raise EventValidationError(field, f"not valid JSON ({exc})") from None
