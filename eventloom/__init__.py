"""Eventloom core: the event envelope, signing, the JSONL ledger and the NATS JetStream log.

The names in `__all__` are imported on first use (PEP 562), so importing one module of the package (the
CLI imports a few on every start) does not import the appender, the log and the schema catalogue too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.lazy import lazy_exports

if TYPE_CHECKING:
    from eventloom.appender import Appender
    from eventloom.errors import (
        ConcurrencyError,
        EventloomError,
        EventValidationError,
        IdempotencyConflictError,
        NodeNotRunningError,
        ReadModelUnavailableError,
        SignatureError,
        UnknownKeyError,
        UntrustedTailError,
        WrongExpectedSeqError,
    )
    from eventloom.event import Event, citation, compute_hash, decode_event, encode_event
    from eventloom.log import EventLog
    from eventloom.position import Appended, Position
    from eventloom.request import AppendRequest
    from eventloom.schemas import (
        COMMON_EVENT_TYPES,
        OPEN_EVENT_TYPE_RULE,
        EventTypeInfo,
        describe_event_types,
        register_event_type,
    )
    from eventloom.settings import Settings

_LAZY: dict[str, str] = {
    "COMMON_EVENT_TYPES": "eventloom.schemas",
    "OPEN_EVENT_TYPE_RULE": "eventloom.schemas",
    "EventTypeInfo": "eventloom.schemas",
    "describe_event_types": "eventloom.schemas",
    "AppendRequest": "eventloom.request",
    "Appended": "eventloom.position",
    "Appender": "eventloom.appender",
    "ConcurrencyError": "eventloom.errors",
    "Event": "eventloom.event",
    "EventLog": "eventloom.log",
    "EventValidationError": "eventloom.errors",
    "EventloomError": "eventloom.errors",
    "IdempotencyConflictError": "eventloom.errors",
    "NodeNotRunningError": "eventloom.errors",
    "Position": "eventloom.position",
    "ReadModelUnavailableError": "eventloom.errors",
    "Settings": "eventloom.settings",
    "SignatureError": "eventloom.errors",
    "UnknownKeyError": "eventloom.errors",
    "UntrustedTailError": "eventloom.errors",
    "WrongExpectedSeqError": "eventloom.errors",
    "citation": "eventloom.event",
    "compute_hash": "eventloom.event",
    "decode_event": "eventloom.event",
    "encode_event": "eventloom.event",
    "register_event_type": "eventloom.schemas",
}

__all__ = [
    "COMMON_EVENT_TYPES",
    "OPEN_EVENT_TYPE_RULE",
    "AppendRequest",
    "Appended",
    "Appender",
    "ConcurrencyError",
    "Event",
    "EventLog",
    "EventTypeInfo",
    "EventValidationError",
    "EventloomError",
    "IdempotencyConflictError",
    "NodeNotRunningError",
    "Position",
    "ReadModelUnavailableError",
    "Settings",
    "SignatureError",
    "UnknownKeyError",
    "UntrustedTailError",
    "WrongExpectedSeqError",
    "citation",
    "compute_hash",
    "decode_event",
    "describe_event_types",
    "encode_event",
    "register_event_type",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
