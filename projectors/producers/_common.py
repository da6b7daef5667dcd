"""Helpers the built-in producers share: reading a payload strictly, stable edge ids, evidence items."""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

import msgspec

from eventloom.event import Event, citation
from projectors.graph.extraction import read_as

_T = TypeVar("_T", bound=msgspec.Struct)
_canonical = msgspec.json.Encoder(order="sorted")


def read_payload(payload: dict[str, Any], schema: type[_T]) -> _T | None:
    """The payload as its schema, or None when it does not fit (wrong types, missing fields).

    Producers see every event, including ones whose payload predates a schema or was appended as an opaque
    type, so a payload that does not fit is simply not something they derive from.
    """
    try:
        return msgspec.convert(payload, schema, strict=True)
    except msgspec.ValidationError:
        return None


def read_event(event: Event, schema: type[_T]) -> _T | None:
    """`event`'s payload as `schema` in the current shape (a design payload read as the current one), or None
    when it does not fit."""
    try:
        return read_as(event, schema)
    except msgspec.ValidationError:
        return None


def edge_id(prefix: str, *parts: str | int) -> str:
    """A stable id: `<prefix>-` and 32 hex of the sha256 of the parts' canonical JSON (no separator games)."""
    digest = hashlib.sha256(_canonical.encode(list(parts))).hexdigest()
    return f"{prefix}-{digest[:32]}"


def event_evidence(session: str, seq: int, event_hash: str) -> dict[str, Any]:
    """An evidence item naming one event by seq, hash and eventloom citation URI."""
    return {"event_seq": seq, "event_hash": event_hash, "citation": citation(session, seq, event_hash)}


def fit(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters (ending in an ellipsis) when it is longer."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def cites_earlier(seq: int, event_seq: int) -> bool:
    """A hash-chained event can only cite an event before it in its own session."""
    return seq < event_seq
