"""Running projectors and producers as workers: alone (`eventloom projector run`) or inside the node."""

from __future__ import annotations

from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.emitter import ProducerProjection
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available, load_producer, load_projector
from projectors.runtime import ProjectorRunner


def enabled_projectors(settings: Settings) -> list[str]:
    return settings.enabled("projectors", list(available(PROJECTORS_GROUP)))


def enabled_producers(settings: Settings) -> list[str]:
    return settings.enabled("producers", list(available(PRODUCERS_GROUP)))


def projector_runner(log: EventLog, name: str, partitions: list[int] | None) -> ProjectorRunner:
    return ProjectorRunner(log.client, log.layout, load_projector(name, log.settings), partitions=partitions)


def producer_runner(log: EventLog, names: list[str], partitions: list[int] | None) -> ProjectorRunner:
    """All `names` share one consumer: each event is delivered once for every producer."""
    producers = [load_producer(name, log.settings) for name in names]
    projection = ProducerProjection(producers, log, name="-".join(sorted(names)))
    return ProjectorRunner(log.client, log.layout, projection, partitions=partitions, role="producer")
