"""Consumer runtime, plug-in API, built-in projectors and inference producers.

The plug-in API, all a plug-in needs to import from here (with `eventloom` for the event itself):
`Projector` and `Producer` (the two contracts; `ProcessProducer` is a producer that reads the log through a
`LogView` with a `ProducerState` of its own), `Rebuildable`, `SkipsSessions` and `Answers` (what a
projector may also offer; `Answers` makes the node serve questions about its read model over NATS),
`DerivedEvent` and `CitedEvent` (what a producer emits: a new event, citing what it derives from),
`PluginContext` (what an entry point is called with), `Generations` (a rebuildable embedded read model's
directories), and `ProjectorRunner` with `RunnerOptions` (and `ProducerProjection` for producers) to run a
plug-in in your own process. `TrackingProjector` drives any store that keeps its checkpoints in the same
write (`readmodels.TrackingRecorder`): a plug-in whose store does only needs that and a function from an
event to a batch item.
Graph extraction for new event types: `projectors.graph.register_extractor`.

The names in `__all__` are imported on first use (PEP 562): importing one module of the package does not
import the runtime, the plug-in loading and every contract with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.lazy import lazy_exports

if TYPE_CHECKING:
    from projectors.emitter import ProducerProjection
    from projectors.generations import Generations
    from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, PluginContext
    from projectors.protocol import (
        Answers,
        CitedEvent,
        DerivedEvent,
        Idles,
        LogView,
        ProcessProducer,
        Producer,
        ProducerState,
        Projector,
        Rebuildable,
        SkipsSessions,
    )
    from projectors.runner import ProjectorRunner, RunnerOptions
    from projectors.tracking import TrackingProjector

_LAZY: dict[str, str] = {
    "Answers": "projectors.protocol",
    "CitedEvent": "projectors.protocol",
    "DerivedEvent": "projectors.protocol",
    "Generations": "projectors.generations",
    "Idles": "projectors.protocol",
    "LogView": "projectors.protocol",
    "PRODUCERS_GROUP": "projectors.plugins",
    "PROJECTORS_GROUP": "projectors.plugins",
    "PluginContext": "projectors.plugins",
    "ProcessProducer": "projectors.protocol",
    "Producer": "projectors.protocol",
    "ProducerProjection": "projectors.emitter",
    "ProducerState": "projectors.protocol",
    "Projector": "projectors.protocol",
    "ProjectorRunner": "projectors.runner",
    "Rebuildable": "projectors.protocol",
    "RunnerOptions": "projectors.runner",
    "SkipsSessions": "projectors.protocol",
    "TrackingProjector": "projectors.tracking",
}

__all__ = [
    "PRODUCERS_GROUP",
    "PROJECTORS_GROUP",
    "Answers",
    "CitedEvent",
    "DerivedEvent",
    "Generations",
    "Idles",
    "LogView",
    "PluginContext",
    "ProcessProducer",
    "Producer",
    "ProducerProjection",
    "ProducerState",
    "Projector",
    "ProjectorRunner",
    "Rebuildable",
    "RunnerOptions",
    "SkipsSessions",
    "TrackingProjector",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
