"""Running projectors and producers as workers: alone (`eventloom projector run`) or inside the node."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.memory_role import LiveReadModels
from projectors.emitter import ProducerProjection
from projectors.graph.projector import GraphProjector
from projectors.lease import ConsumerLease
from projectors.partitions import consumer_name
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available, load_producer, load_projector
from projectors.protocol import Answers
from projectors.runner import ProjectorRunner, RunnerOptions, TroubleListener
from readmodels.consistency import Progress
from readmodels.query.answers import serve_answers
from readmodels.query.cypher_service import serve_cypher


def enabled_projectors(settings: Settings) -> list[str]:
    return settings.enabled("projectors", list(available(PROJECTORS_GROUP)))


def enabled_producers(settings: Settings) -> list[str]:
    return settings.enabled("producers", list(available(PRODUCERS_GROUP)))


def worker_options(settings: Settings, *, sole_worker: bool = False) -> RunnerOptions:
    """A worker's options from the settings: its ack wait governs how soon another worker takes over, its
    batch how many events it holds at once (larger when it is the process's only worker)."""
    return RunnerOptions(
        ack_wait_s=settings.projector_ack_wait_s,
        batch=settings.worker_batch(sole_worker=sole_worker),
        linger_s=settings.projector_linger_ms / 1000,
    )


def projector_runner(
    log: EventLog,
    name: str,
    partitions: list[int] | None,
    on_trouble: TroubleListener | None = None,
    *,
    sole_worker: bool = False,
) -> ProjectorRunner:
    """Every worker of a projector's consumer (the node's, `query serve`'s, `projector run`'s) takes its
    lease before applying: one applies, the others stand by. Producers share their consumer without one:
    they take events in any order and are fenced per derivation."""
    settings = log.settings
    consumer = consumer_name("projector", name, partitions)
    return ProjectorRunner(
        log.client,
        log.layout,
        load_projector(name, settings),
        partitions=partitions,
        consumer=consumer,
        options=worker_options(settings, sole_worker=sole_worker),
        keys=KeyStore(settings.data_dir),
        on_trouble=on_trouble,
        lease=ConsumerLease(log.client, consumer, settings.projector_lease_s, replicas=settings.replicas),
        known=log.known_hashes,
    )


async def run_projector(
    log: EventLog,
    name: str,
    partitions: list[int] | None,
    stop: asyncio.Event,
    live: LiveReadModels | None = None,
    on_trouble: TroubleListener | None = None,
) -> None:
    """Run a projector; once its store is open, a graph projector also answers read-only Cypher for the
    processes that ask, and a projector that `Answers` its questions (`eventloom.q.<name>.<question>`).

    With `live`, the projector's read model is also offered to this process's query service; `on_trouble`
    hears when its read model cannot be written (and when it can again)."""
    runner = projector_runner(log, name, partitions, on_trouble)
    if live is not None:
        live.add(runner)
    services = _services(log, runner, stop)
    if not services:
        await runner.run(stop)
        return

    async def serve_once_open(serve: Callable[[], Awaitable[None]]) -> None:
        waits = [asyncio.create_task(runner.ready.wait()), asyncio.create_task(stop.wait())]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if not stop.is_set():  # a question before the store is open would only get an error
            await serve()

    async with asyncio.TaskGroup() as group:
        group.create_task(runner.run(stop))
        for serve in services:
            group.create_task(serve_once_open(serve))


def _services(
    log: EventLog, runner: ProjectorRunner, stop: asyncio.Event
) -> list[Callable[[], Awaitable[None]]]:
    """What the runner's projector answers over NATS besides projecting: always against its live store;
    a question given `after` waits for the projector's checkpoints, hurrying the runner."""
    projector = runner.projector
    services: list[Callable[[], Awaitable[None]]] = []
    if isinstance(projector, GraphProjector):
        graph = projector
        services.append(lambda: serve_cypher(log.client, lambda: graph.store, stop))
    if isinstance(projector, Answers):
        answers = projector
        progress = projector if isinstance(projector, Progress) else None
        services.append(
            lambda: serve_answers(
                log.client, projector.name, answers.answer, stop, progress=progress, hurry=runner.hurry
            )
        )
    return services


def producer_runner(
    log: EventLog, names: list[str], partitions: list[int] | None, *, sole_worker: bool = False
) -> ProjectorRunner:
    """All `names` share one consumer: each event is delivered once for every producer."""
    producers = [load_producer(name, log.settings) for name in names]
    projection = ProducerProjection(producers, log, name="-".join(sorted(names)))
    return ProjectorRunner(
        log.client,
        log.layout,
        projection,
        partitions=partitions,
        options=worker_options(log.settings, sole_worker=sole_worker),
        role="producer",
        keys=KeyStore(log.settings.data_dir),
        known=log.known_hashes,
    )
