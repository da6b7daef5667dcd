"""Payload schemas of the known event types, and the open registry plug-ins extend."""

from eventloom.schemas import catalogue as catalogue
from eventloom.schemas.describe import (
    COMMON_EVENT_TYPES,
    OPEN_EVENT_TYPE_RULE,
    EventTypeInfo,
    describe_event_types,
)
from eventloom.schemas.registry import (
    EVENT_TYPES_GROUP,
    OPEN_TYPE_PREFIX,
    Origin,
    current_fields,
    current_payload,
    decode_payload,
    is_open_event_type,
    known_event_types,
    load_plugin_event_types,
    register_event_type,
    schema_for,
    validate_payload,
)

__all__ = [
    "COMMON_EVENT_TYPES",
    "EVENT_TYPES_GROUP",
    "OPEN_EVENT_TYPE_RULE",
    "OPEN_TYPE_PREFIX",
    "EventTypeInfo",
    "Origin",
    "current_fields",
    "current_payload",
    "decode_payload",
    "describe_event_types",
    "is_open_event_type",
    "known_event_types",
    "load_plugin_event_types",
    "register_event_type",
    "schema_for",
    "validate_payload",
]
