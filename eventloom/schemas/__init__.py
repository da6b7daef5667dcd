"""Payload schemas of the known event types, and the open registry plug-ins extend."""

from eventloom.schemas import catalogue as catalogue
from eventloom.schemas.registry import (
    EVENT_TYPES_GROUP,
    decode_payload,
    known_event_types,
    load_plugin_event_types,
    register_event_type,
    schema_for,
    validate_payload,
)

__all__ = [
    "EVENT_TYPES_GROUP",
    "decode_payload",
    "known_event_types",
    "load_plugin_event_types",
    "register_event_type",
    "schema_for",
    "validate_payload",
]
