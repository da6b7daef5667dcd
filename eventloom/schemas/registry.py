"""The open registry of payload schemas: one msgspec Struct per known event type.

An append of a type nobody registered is refused (`validate_payload`, naming the closest known types) unless
the type is open: it starts with `x.`, or `EVENTLOOM_OPEN_EVENT_TYPES` matches it. Reading never refuses a
type: events already in a log are read whatever their type.
"""

from __future__ import annotations

import difflib
import os
import re
import threading
from fnmatch import fnmatchcase
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import TYPE_PATTERN

if TYPE_CHECKING:
    from eventloom.event import Event

EVENT_TYPES_GROUP: Final = "eventloom.event_types"
"""Entry points of plug-in packs: each names a function of no arguments that registers its types."""

OPEN_TYPE_PREFIX: Final = "x."
"""Types that start with it are open: stored without a schema (`x.myteam.note_added`), never refused."""
OPEN_TYPES_VARIABLE: Final = "EVENTLOOM_OPEN_EVENT_TYPES"
"""Comma-separated shell-style patterns of further open types (`note.*,acme.*`); `*` opens every type."""

_schemas: dict[str, type[msgspec.Struct]] = {}
_examples: dict[str, dict[str, Any]] = {}
_plugins_loaded: list[bool] = []  # one element once the packs are loaded (a flag without `global`)
_plugins_lock = threading.Lock()
_legacy: dict[str, tuple[type[msgspec.Struct], ...]] = {}
_PATH_IN_MESSAGE = re.compile(r" - at `\$(?P<path>[^`]*)`$")
_MISSING_FIELD = re.compile(r"^Object missing required field `(?P<name>[^`]+)`")


class Origin(NamedTuple):
    """Where a payload comes from: the session and actor of its event (a legacy payload may leave them
    implicit, and its `upgraded(origin)` makes them explicit)."""

    session: str
    actor: str


UNKNOWN_ORIGIN: Final = Origin(session="unknown", actor="unknown")
"""The origin a payload is checked with when it has none yet (its upgrade is only checked for shape)."""


def register_event_type(
    event_type: str,
    schema: type[msgspec.Struct],
    *,
    replace: bool = False,
    legacy: tuple[type[msgspec.Struct], ...] = (),
    example: dict[str, Any] | None = None,
) -> None:
    """Make `event_type` a known type whose payload must convert to `schema`.

    Plug-ins call this at import time. Registering a different schema for a type that already has one is
    refused unless `replace` is set, so two plug-ins cannot silently disagree about a payload. `legacy` lists
    the schemas of earlier payload versions, newest first: new events must fit `schema`, while events already
    in the log stay readable through `decode_payload`. `example` is one valid payload, shown to agents by
    `describe_event_types`; it must fit `schema`. A legacy schema with a method `upgraded(origin) -> dict`
    (the payload in the current shape) is still accepted on append, and `current_payload` upgrades it.
    """
    if not TYPE_PATTERN.fullmatch(event_type):
        raise EventValidationError("type", f"{event_type!r} is not a dotted snake_case event type")
    existing = _schemas.get(event_type)
    if existing is not None and existing is not schema and not replace:
        raise ValueError(f"event type {event_type!r} already has schema {existing.__qualname__}")
    if example is not None:
        msgspec.convert(example, schema, strict=True)  # a wrong example is the registrant's bug: raise now
        _examples[event_type] = example
    _schemas[event_type] = schema
    _legacy[event_type] = legacy


def load_plugin_event_types() -> None:
    """Register the event types of every installed pack (`eventloom.event_types`), once per process.

    Called before any lookup, so a process validates a pack's events as soon as the pack is installed,
    whether or not it imported the pack. A pack that fails to load is an error, not a silent gap.
    """
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded:
            return
        _plugins_loaded.append(True)
        for entry in entry_points(group=EVENT_TYPES_GROUP):
            register = entry.load()
            register()


def schema_for(event_type: str) -> type[msgspec.Struct] | None:
    """The registered schema, or None for an unknown (opaque) type."""
    load_plugin_event_types()
    return _schemas.get(event_type)


def decode_payload(event_type: str, payload: dict[str, Any]) -> msgspec.Struct:
    """A known type's payload as the first of its schemas it fits: the current one, then each legacy one.

    That is how a payload version is told apart: by the schema it fits (`isinstance` on the result). Raises
    `EventValidationError` (naming the current schema's complaint) when it fits none, and for an unknown type.
    """
    load_plugin_event_types()
    schema = _schemas.get(event_type)
    if schema is None:
        raise EventValidationError("type", f"{event_type!r} is not a known event type")
    for version in (schema, *_legacy.get(event_type, ())):
        try:
            return msgspec.convert(payload, version, strict=True)
        except msgspec.ValidationError:
            continue
    validate_payload(event_type, payload)
    raise AssertionError("unreachable: the current schema rejected the payload above")


def current_payload(event: Event) -> msgspec.Struct:
    """`event`'s payload decoded (`decode_payload`), in the current shape when its version can be upgraded:
    what every consumer should read, so that none of them needs to know an upgradable legacy shape."""
    decoded = decode_payload(event.type, event.payload)
    upgrade = getattr(decoded, "upgraded", None)
    if upgrade is None:
        return decoded
    return _convert(event.type, upgrade(Origin(event.session, event.actor)))


def current_fields(event: Event) -> dict[str, Any]:
    """`event`'s payload as a JSON object in the current shape: the stored object itself, unless it is of an
    upgradable legacy version (then its upgrade). For consumers that read fields by name."""
    if not any(hasattr(version, "upgraded") for version in legacy_schemas(event.type)):
        return event.payload
    try:
        decoded = decode_payload(event.type, event.payload)
    except EventValidationError:
        return event.payload
    upgrade = getattr(decoded, "upgraded", None)
    if upgrade is None:
        return event.payload
    upgraded: dict[str, Any] = upgrade(Origin(event.session, event.actor))
    return upgraded


def _convert(event_type: str, payload: dict[str, Any]) -> msgspec.Struct:
    try:
        return msgspec.convert(payload, _schemas[event_type], strict=True)
    except msgspec.ValidationError as exc:
        raise EventValidationError(*_field_and_reason(str(exc))) from None


Problem = tuple[str, str]
"""(field, reason) of an `EventValidationError`."""


def _upgradable_problems(
    event_type: str, payload: dict[str, Any], origin: Origin
) -> list[tuple[type[msgspec.Struct], Problem]] | None:
    """Why `payload` fits none of the upgradable legacy versions; None when it fits one (and its upgrade
    fits the current schema, else that complaint is raised)."""
    problems: list[tuple[type[msgspec.Struct], Problem]] = []
    for version in _legacy.get(event_type, ()):
        if not hasattr(version, "upgraded"):
            continue
        try:
            legacy = msgspec.convert(payload, version, strict=True)
        except msgspec.ValidationError as exc:
            problems.append((version, _field_and_reason(str(exc))))
            continue
        _convert(event_type, legacy.upgraded(origin))
        return None
    return problems


def _meant(
    current: type[msgspec.Struct],
    payload: dict[str, Any],
    problem: Problem,
    legacy: list[tuple[type[msgspec.Struct], Problem]],
) -> Problem:
    """The complaint of the version `payload` was meant for: a legacy version when the payload has more of
    the fields only it names than of the fields only the current schema names; else the current one's."""
    keys = set(payload)
    names = _field_names(current)
    for version, legacy_problem in legacy:
        own = _field_names(version)
        if len(keys & (own - names)) > len(keys & (names - own)):
            return legacy_problem
    return problem


def _field_names(schema: type[msgspec.Struct]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(schema)}


def known_event_types() -> list[str]:
    load_plugin_event_types()
    return sorted(_schemas)


def example_payload(event_type: str) -> dict[str, Any] | None:
    """The example payload registered with `event_type`, or None."""
    load_plugin_event_types()
    return _examples.get(event_type)


def legacy_schemas(event_type: str) -> tuple[type[msgspec.Struct], ...]:
    """The earlier payload versions still accepted for `event_type`, newest first."""
    load_plugin_event_types()
    return _legacy.get(event_type, ())


def is_open_event_type(event_type: str) -> bool:
    """True for a type stored without a schema: one starting `x.`, or one EVENTLOOM_OPEN_EVENT_TYPES opens."""
    if event_type.startswith(OPEN_TYPE_PREFIX):
        return True
    return any(
        fnmatchcase(event_type, pattern)
        for pattern in _open_patterns(os.environ.get(OPEN_TYPES_VARIABLE, ""))
    )


@lru_cache(maxsize=8)
def _open_patterns(setting: str) -> tuple[str, ...]:
    return tuple(pattern.strip() for pattern in setting.split(",") if pattern.strip())


def closest_event_types(name: str, count: int = 3) -> list[str]:
    """The known types spelt most like `name` (a misspelling, or an invented type of a known family)."""
    known = known_event_types()
    close = difflib.get_close_matches(name, known, n=count, cutoff=0.6)
    if close:
        return close
    family = name.split(".", 1)[0] + "."
    return [known_type for known_type in known if known_type.startswith(family)][:count]


def unknown_type_error(event_type: str) -> EventValidationError:
    """The refusal of an unknown type: what it is not, the closest known types, and how to open a type."""
    close = closest_event_types(event_type)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return EventValidationError(
        "type",
        f"{event_type!r} is not a known event type; {hint}`eventloom types` lists them. A type starting "
        f"with `{OPEN_TYPE_PREFIX}` (e.g. `{OPEN_TYPE_PREFIX}{event_type}`) is stored without a schema.",
    )


def validate_payload(event_type: str, payload: dict[str, Any], origin: Origin = UNKNOWN_ORIGIN) -> None:
    """Check a known type's payload against its schema (or an upgradable legacy version, whose upgrade must
    fit it); an open type's payload is an opaque object, any other type is refused (`unknown_type_error`)."""
    load_plugin_event_types()
    schema = _schemas.get(event_type)
    if schema is None:
        if is_open_event_type(event_type):
            return
        raise unknown_type_error(event_type)
    try:
        msgspec.convert(payload, schema, strict=True)
    except msgspec.ValidationError as exc:
        current = _field_and_reason(str(exc))
    else:
        return
    legacy = _upgradable_problems(event_type, payload, origin)
    if legacy is not None:
        raise EventValidationError(*_meant(schema, payload, current, legacy))


def _field_and_reason(message: str) -> tuple[str, str]:
    match = _PATH_IN_MESSAGE.search(message)
    path = match.group("path") if match else ""
    reason = message[: match.start()] if match else message
    missing = _MISSING_FIELD.match(reason)
    if missing:
        return f"payload{path}.{missing.group('name')}", "required field is missing"
    return f"payload{path}", reason
