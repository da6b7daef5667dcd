"""The read models of bench/query.py: rebuilt from the stream, then opened as the node opens them."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from common import progress_bar
from nats.aio.client import Client

from eventloom.log import EventLog
from gateway.memory_role import memory_over
from projectors.graph.rebuild_neo4j import rebuild_neo4j_from_stream
from projectors.plugins import load_projector
from projectors.protocol import Projector
from projectors.rebuild import rebuild
from readmodels.query.local import LocalMemory

MODELS = ("graph", "keyword", "vector", "inferred")


@dataclass
class BuiltModels:
    memory: LocalMemory
    client: Client
    build_s: float


async def rebuild_all(log: EventLog) -> None:
    with progress_bar() as progress:
        for name in MODELS:
            task = progress.add_task(f"rebuild {name}", total=None, rate="")

            def advance(done: int, total: int, task: int = task) -> None:
                progress.update(task, completed=done, total=total)  # type: ignore[arg-type]

            if name == "graph" and log.settings.graph_backend == "neo4j":
                await rebuild_neo4j_from_stream(
                    log, progress=lambda _phase, done, total: advance(done, total)
                )
            else:
                await rebuild(log, name, progress=advance)


@contextlib.asynccontextmanager
async def build_models(log: EventLog) -> AsyncIterator[BuiltModels]:
    """Rebuild every model the query service reads, open them, and yield a `LocalMemory` over them."""
    started = time.perf_counter()
    await rebuild_all(log)
    opened: dict[str, Projector] = {}
    try:
        for name in MODELS:
            projector = load_projector(name, log.settings)
            await projector.open()
            opened[name] = projector
        yield BuiltModels(
            memory=memory_over(lambda: opened), client=log.client, build_s=time.perf_counter() - started
        )
    finally:
        for projector in opened.values():
            await projector.close()
