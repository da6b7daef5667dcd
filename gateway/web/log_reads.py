"""What the web view reads from the log itself: the sessions, a session's timeline, one event, the peers.

The timeline's one-line summaries are those the graph extractor writes on the spine (`projectors.graph`),
computed here from the events, so the timeline needs no read model.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import msgspec

from eventloom.bus import read_peers
from eventloom.bus.stream import subject_counts
from eventloom.event import Event
from eventloom.log import EventLog
from projectors.graph import extract
from projectors.status import ConsumerStatus, consumer_statuses

log = logging.getLogger(__name__)


class SessionInfo(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    events: int


class TimelineEvent(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    ts: str
    type: str
    actor: str
    summary: str
    citation: str


class Timeline(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    events: list[TimelineEvent]
    next_seq: int | None = None  # where the next page starts; None: this was the end
    skipped: int = 0  # messages on the session's subject that are not events (`eventloom.reading`)
    warnings: list[str] = msgspec.field(default_factory=list)


class Peers(msgspec.Struct, frozen=True, kw_only=True):
    """The peers' heartbeats (`eventloom.bus.read_peers`, each flat: id, role, status, age_s, lag...) and
    each consumer's lag (what `eventloom projector status` shows)."""

    peers: list[dict[str, Any]] = msgspec.field(default_factory=list)
    projectors: list[ConsumerStatus] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)


async def sessions(event_log: EventLog) -> list[SessionInfo]:
    """Every session of the stream with its event count, by name."""
    layout = event_log.layout
    counts = await subject_counts(event_log.client, layout.name, layout.all_subjects)
    found = {subject.rsplit(".", 1)[-1]: count for subject, count in counts.items()}
    return [SessionInfo(session=name, events=count) for name, count in sorted(found.items())]


def summary_of(event: Event) -> str:
    return extract(event).event.summary


async def timeline(event_log: EventLog, session: str, from_seq: int, limit: int) -> Timeline:
    events: list[TimelineEvent] = []
    next_seq: int | None = None
    reading = event_log.events(session, from_seq=from_seq)
    async with contextlib.aclosing(reading):
        async for event in reading:
            if len(events) == limit:
                next_seq = event.seq
                break
            events.append(
                TimelineEvent(
                    seq=event.seq,
                    ts=event.ts,
                    type=event.type,
                    actor=event.actor,
                    summary=summary_of(event),
                    citation=event.citation,
                )
            )
    return Timeline(
        session=session,
        events=events,
        next_seq=next_seq,
        skipped=reading.skipped,
        warnings=reading.warnings,
    )


async def one_event(event_log: EventLog, session: str, seq: int) -> dict[str, Any] | None:
    """The event at `seq` of `session`, whole (payload, hashes, signature), with its citation."""
    stored = await event_log.event(session, seq)
    if stored is None:
        return None
    event = stored.event
    whole: dict[str, Any] = msgspec.to_builtins(event)
    return {**whole, "citation": event.citation, "summary": summary_of(event)}


async def peers(event_log: EventLog) -> Peers:
    """Heartbeats when this Eventloom has them, and the lag of every projector, producer and mirror."""
    warnings: list[str] = []
    heard: list[dict[str, Any]] = []
    try:
        heard = [peer.flat() for peer in await read_peers(event_log.client, event_log.settings)]
    except Exception as exc:
        log.exception("reading the peers' heartbeats failed")
        warnings.append(f"peers: {type(exc).__name__}: {exc}")
    try:
        statuses = await consumer_statuses(event_log.client, event_log.layout)
    except Exception as exc:
        log.exception("reading the consumers' status failed")
        statuses, warnings = [], [*warnings, f"projectors: {type(exc).__name__}: {exc}"]
    return Peers(peers=heard, projectors=statuses, warnings=warnings)
