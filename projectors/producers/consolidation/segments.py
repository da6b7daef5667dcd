"""Cutting a session into episodes: by time gaps, `session.ended`, topic shifts and a size cap.

The cut is online: whether an event opens a new segment depends only on the events before it. So the
segmentation of a prefix of a session is the segmentation of the whole, up to its last (still open)
segment; that is what lets the producer propose each episode exactly once, when its stretch closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal, TypeAlias

from eventloom.event import Event
from projectors.producers.consolidation.text import event_text, is_derived, topic_words

SESSION_ENDED: Final = "session.ended"
Opening: TypeAlias = Literal["start", "gap", "ended", "topic", "size"]
HARD_OPENINGS: Final = frozenset({"start", "gap", "ended"})
"""Openings that begin a new stretch: the topic state starts afresh, whatever came before."""


@dataclass(frozen=True)
class SegmentRules:
    """How a session is cut. Defaults: a 30-minute pause, or a turn to words the segment has not used."""

    gap_s: float = 1800.0
    topic_overlap: float = 0.15
    """An event whose words overlap the segment's vocabulary less than this (as a share of its own words)
    opens a new segment ..."""
    min_topic_events: int = 4
    """... but only once the segment has this many events: a few events do not make a topic yet ..."""
    min_topic_words: int = 3
    """... and only for an event with this many words: `make build` says too little to change the topic."""
    max_events: int = 200
    """A longer segment is cut anyway, so that one episode cites a bounded number of events."""


@dataclass
class Segment:
    opened_by: Opening
    events: list[Event] = field(default_factory=list)
    vocabulary: set[str] = field(default_factory=set)


def segment(events: Sequence[Event], rules: SegmentRules = SegmentRules()) -> list[Segment]:
    """The session's events (in seq order) cut into segments; derived events and `session.ended` markers
    are boundaries or nothing, never content."""
    segments: list[Segment] = []
    last_ts: datetime | None = None
    after_end = False
    for event in events:
        if is_derived(event):
            continue
        if event.type == SESSION_ENDED:
            after_end = True
            continue
        words = topic_words(event_text(event))
        ts = _parse_ts(event.ts)
        current = segments[-1] if segments else None
        opening = _opening(current, words, ts, last_ts, after_end, rules)
        if opening is not None:
            current = Segment(opened_by=opening)
            segments.append(current)
        assert current is not None
        current.events.append(event)
        current.vocabulary |= words
        last_ts, after_end = ts, False
    return segments


def _opening(
    current: Segment | None,
    words: frozenset[str],
    ts: datetime,
    last_ts: datetime | None,
    after_end: bool,
    rules: SegmentRules,
) -> Opening | None:
    """Why this event opens a new segment, or None when it continues the current one."""
    if after_end:
        return "ended"
    if current is None:
        return "start"
    if last_ts is not None and (ts - last_ts).total_seconds() > rules.gap_s:
        return "gap"
    if len(current.events) >= rules.max_events:
        return "size"
    enough_for_a_topic = len(current.events) >= rules.min_topic_events
    says_enough = len(words) >= rules.min_topic_words
    if (
        enough_for_a_topic
        and says_enough
        and len(words & current.vocabulary) / len(words) < rules.topic_overlap
    ):
        return "topic"
    return None


def last_stretch(segments: Sequence[Segment]) -> list[Segment]:
    """The trailing segments since the last hard opening (start, gap, session end)."""
    for index in range(len(segments) - 1, -1, -1):
        if segments[index].opened_by in HARD_OPENINGS:
            return list(segments[index:])
    return list(segments)


def gap_between(earlier: Event, later: Event) -> float:
    return (_parse_ts(later.ts) - _parse_ts(earlier.ts)).total_seconds()


def _parse_ts(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))
