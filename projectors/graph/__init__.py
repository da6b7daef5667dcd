"""The built-in graph projector: pure per-type extraction into the temporal graph read model."""

from projectors.graph.extract import extract, register_extractor
from projectors.graph.projector import GraphProjector

__all__ = ["GraphProjector", "extract", "register_extractor"]
