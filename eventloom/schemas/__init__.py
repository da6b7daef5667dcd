"""Payload schemas of the known event types, and the open registry plug-ins extend."""

from eventloom.schemas import catalogue as catalogue
from eventloom.schemas.registry import (
    known_event_types,
    register_event_type,
    schema_for,
    validate_payload,
)

__all__ = ["known_event_types", "register_event_type", "schema_for", "validate_payload"]
