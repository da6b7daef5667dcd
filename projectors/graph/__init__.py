"""The built-in graph projector: pure per-type extraction into the temporal graph read model.

A plug-in pack adds the graph extraction of its event types with `register_extractor`, called from the
function its `eventloom.graph_extractors` entry point names; `Extraction` (with `typed`, `clip` and
`compact`) is how an extractor says what an event means.
"""

from projectors.graph.extraction import Extraction, Extractor, clip, compact, typed
from projectors.graph.projector import GraphProjector
from projectors.graph.registry import (
    EXTRACTORS_GROUP,
    extract,
    extractor_for,
    load_plugin_extractors,
    register_extractor,
)

__all__ = [
    "EXTRACTORS_GROUP",
    "Extraction",
    "Extractor",
    "GraphProjector",
    "clip",
    "compact",
    "extract",
    "extractor_for",
    "load_plugin_extractors",
    "register_extractor",
    "typed",
]
