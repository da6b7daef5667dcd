"""Built-in inference producers: pure `derive(event)` functions the runtime appends the results of."""

from __future__ import annotations

from typing import Final

from projectors.producers.causal import CausalProducer
from projectors.producers.consolidation import ConsolidationProducer
from projectors.producers.decision_citation import DecisionCitationProducer
from projectors.producers.entity_resolution import EntityResolutionProducer
from projectors.producers.retraction import RetractionProducer
from projectors.protocol import Producer

BUILTIN_PRODUCERS: Final[dict[str, Producer]] = {
    producer.name: producer
    for producer in (DecisionCitationProducer(), RetractionProducer(), CausalProducer())
}
"""Name -> producer. They are stateless, so one instance each serves every run; each class is also its own
entry-point factory (it accepts the plug-in context). `ConsolidationProducer` and `EntityResolutionProducer`
are not among them: they are `ProcessProducer`s (they read the log and keep state), registered only through
their entry points."""

__all__ = [
    "BUILTIN_PRODUCERS",
    "CausalProducer",
    "ConsolidationProducer",
    "DecisionCitationProducer",
    "EntityResolutionProducer",
    "RetractionProducer",
]
