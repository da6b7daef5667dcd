"""The `inferred` entry point: the inferred-edge audit view in SQLite under `<data>/readmodels/inferred`."""

from __future__ import annotations

from pathlib import Path

from projectors.generational import GenerationalProjector
from projectors.generations import Generations
from projectors.inferred.extract import inferred_changes
from projectors.plugins import PluginContext
from readmodels.embedded.inferred_store import SqliteInferredStore
from readmodels.inferred.model import EventChanges

DATABASE = "inferred.sqlite"


def live_database(state_dir: Path) -> Path | None:
    """The live generation's database (what `eventloom memory inferred-status` reads), if there is one."""
    live = Generations(state_dir).live()
    return live / DATABASE if live is not None else None


def inferred_projector(context: PluginContext) -> GenerationalProjector[SqliteInferredStore, EventChanges]:
    """Keeps the audit view of every inferred and causal edge; rebuildable like the keyword model."""
    return GenerationalProjector(context, DATABASE, SqliteInferredStore, inferred_changes)
