"""The built-in graph projector: pure per-type extraction into the temporal graph read model."""

from projectors.graph.projector import GraphProjector
from projectors.graph.registry import extract, register_extractor

__all__ = ["GraphProjector", "extract", "register_extractor"]
