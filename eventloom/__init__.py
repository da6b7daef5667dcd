"""Eventloom core: the event envelope, signing, the JSONL ledger and the NATS JetStream log."""

from eventloom.appender import Appender
from eventloom.errors import (
    ConcurrencyError,
    EventloomError,
    EventValidationError,
    NodeNotRunningError,
    ReadModelUnavailableError,
    SignatureError,
    UnknownKeyError,
    UntrustedTailError,
    WrongExpectedSeqError,
)
from eventloom.event import Event, citation, compute_hash, decode_event, encode_event
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.schemas import register_event_type
from eventloom.settings import Settings

__all__ = [
    "AppendRequest",
    "Appender",
    "ConcurrencyError",
    "Event",
    "EventLog",
    "EventValidationError",
    "EventloomError",
    "NodeNotRunningError",
    "ReadModelUnavailableError",
    "Settings",
    "SignatureError",
    "UnknownKeyError",
    "UntrustedTailError",
    "WrongExpectedSeqError",
    "citation",
    "compute_hash",
    "decode_event",
    "encode_event",
    "register_event_type",
]
