"""Finding projectors and producers: built-ins and third-party plug-ins, through entry points.

A plug-in package declares, in its pyproject.toml:

    [project.entry-points."eventloom.projectors"]
    my-projector = "my_package:MyProjector"

The object named is called with a `PluginContext` and returns the projector (or producer).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from eventloom.errors import EventloomError
from eventloom.settings import Settings
from projectors.protocol import ProcessProducer, Producer, Projector

PROJECTORS_GROUP = "eventloom.projectors"
PRODUCERS_GROUP = "eventloom.producers"


@dataclass(frozen=True)
class PluginContext:
    """What a plug-in factory gets: the settings, and a directory of its own for embedded read models."""

    settings: Settings
    name: str
    generation: Path | None = None  # set by `eventloom rebuild`: build into this directory instead

    @property
    def memory_skips(self) -> frozenset[str]:
        """The sessions the built-in memory models leave out: the gateway's audit (tool calls, not memory)."""
        return frozenset({self.settings.audit_session})

    @property
    def state_dir(self) -> Path:
        return self.settings.data_dir / "readmodels" / self.name


def available(group: str) -> dict[str, EntryPoint]:
    return {entry.name: entry for entry in entry_points(group=group)}


def load_projector(name: str, settings: Settings, generation: Path | None = None) -> Projector:
    projector = _load(PROJECTORS_GROUP, name, settings, generation)
    if not isinstance(projector, Projector):
        raise EventloomError(f"projector {name!r}: its entry point did not return a Projector")
    return projector


def load_producer(name: str, settings: Settings) -> Producer | ProcessProducer:
    producer = _load(PRODUCERS_GROUP, name, settings)
    if not isinstance(producer, Producer | ProcessProducer):
        raise EventloomError(
            f"producer {name!r}: its entry point did not return a Producer or ProcessProducer"
        )
    return producer


def _load(group: str, name: str, settings: Settings, generation: Path | None = None) -> Any:
    entries = available(group)
    entry = entries.get(name)
    if entry is None:
        known = ", ".join(sorted(entries)) or "none installed"
        raise EventloomError(f"no {group.rsplit('.', 1)[-1][:-1]} named {name!r} (available: {known})")
    factory = entry.load()
    context = PluginContext(settings=settings, name=name, generation=generation)
    context.state_dir.mkdir(parents=True, exist_ok=True)
    return factory(context)
