"""Graph extraction: a registry of pure functions `Event -> EventProjection`, one per event type.

Every built-in type of `eventloom.schemas.catalogue` has one (the modules of `projectors.graph.extractors`:
`work`, `activity`, `sources`, `memory`, `inference`); plug-ins add theirs with `register_extractor`, from a
function of no arguments named by an entry point of group `eventloom.graph_extractors`: every installed
pack's extractors are registered before the first lookup, in whichever process projects (graph, keyword
and vector projectors alike), without the core importing the pack.
An event of an unknown type projects its spine node and one generic entity (type `event`). So does a
known type whose payload no longer fits its schema, or whose extraction would write something invalid:
the session spine stays complete and the problem is recorded on that entity (`invalid_payload`), instead
of one bad event blocking the projector forever.
"""

from __future__ import annotations

import threading
from importlib.metadata import entry_points
from typing import Final

import msgspec

from eventloom.event import Event
from projectors.graph.extraction import Extraction, Extractor, clip
from projectors.graph.extractors.activity import EXTRACTORS as ACTIVITY
from projectors.graph.extractors.inference import EXTRACTORS as INFERENCE
from projectors.graph.extractors.memory import EXTRACTORS as MEMORY
from projectors.graph.extractors.sources import EXTRACTORS as SOURCES
from projectors.graph.extractors.work import EXTRACTORS as WORK
from readmodels.graph.identity import encode_json
from readmodels.graph.model import EventProjection, InvalidGraphWrite

GENERIC_ENTITY_TYPE: Final = "event"
EXTRACTORS_GROUP: Final = "eventloom.graph_extractors"
"""Entry points of plug-in packs: each names a function of no arguments that calls `register_extractor`."""

BUILTIN_EXTRACTORS: Final[dict[str, Extractor]] = {
    **WORK,
    **ACTIVITY,
    **SOURCES,
    **MEMORY,
    **INFERENCE,
}
"""The extractor of every built-in event type."""

_registry: dict[str, Extractor] = dict(BUILTIN_EXTRACTORS)
_plugins_loaded: list[bool] = []  # one element once the packs are loaded (a flag without `global`)
_plugins_lock = threading.Lock()


def register_extractor(event_type: str, extractor: Extractor, *, replace: bool = False) -> None:
    """Make `extractor` project events of `event_type` (refused if another one is there, unless `replace`)."""
    existing = _registry.get(event_type)
    if existing is not None and existing is not extractor and not replace:
        raise ValueError(f"event type {event_type!r} already has a graph extractor")
    _registry[event_type] = extractor


def load_plugin_extractors() -> None:
    """Register the extractors of every installed pack (`eventloom.graph_extractors`), once per process.

    Called before any lookup, so a projector reads a pack's events as soon as the pack is installed. A
    pack that fails to load is an error, not a silent gap (its events would project as generic ones).
    """
    if _plugins_loaded:
        return
    with _plugins_lock:
        if _plugins_loaded:
            return
        for entry in entry_points(group=EXTRACTORS_GROUP):
            register = entry.load()
            register()
        _plugins_loaded.append(True)


def extractor_for(event_type: str) -> Extractor | None:
    load_plugin_extractors()
    return _registry.get(event_type)


def generic(event: Event, problem: str | None = None) -> EventProjection:
    """The projection of an event nobody knows how to read: its spine node and one `event` entity."""
    x = Extraction(event)
    properties: dict[str, object] = {"event_type": event.type, "payload_keys": sorted(event.payload)}
    if problem is not None:
        properties["invalid_payload"] = problem
    summary = clip(f"{event.type}: {encode_json(event.payload)}")
    x.entity(f"{event.type}#{event.seq}", GENERIC_ENTITY_TYPE, summary, properties)
    x.summary = summary
    return x.projection()


def extract(event: Event) -> EventProjection:
    """What `event` writes to the graph. Pure and deterministic: same event, same projection."""
    extractor = extractor_for(event.type)
    if extractor is None:
        return generic(event)
    try:
        return extractor(event)
    except (msgspec.ValidationError, InvalidGraphWrite) as exc:
        return generic(event, problem=str(exc))
