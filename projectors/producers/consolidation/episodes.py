"""Episodes: a closed stretch of one session, cut by topic, each part summarised extractively.

A stretch closes at `session.ended` or at the first event after a long pause; that event triggers the
proposal, so each episode is proposed once, by one event, and from the log before it (deterministic).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from eventloom.event import Event
from projectors.producers.consolidation.proposal import Proposal, cite
from projectors.producers.consolidation.segments import (
    SESSION_ENDED,
    Segment,
    SegmentRules,
    gap_between,
    last_stretch,
    segment,
)
from projectors.producers.consolidation.summaries import extractive
from projectors.producers.consolidation.text import event_text, is_derived
from projectors.protocol import LogView

METHOD: Final = "episode_time_topic_v1"
# An extractive episode is a faithful digest of what happened (every sentence is a cited event's own text),
# but where it starts and ends is a heuristic: middling confidence, for a reviewer to confirm.
CONFIDENCE: Final = 0.6
_DERIVED_LOOKBACK: Final = 20  # producers' events between two of the session's own, looked past at most
_SNAKE_CASE: Final = re.compile(r"^[a-z][a-z0-9_]{0,127}$")  # what `SubjectRef.entity_type` accepts


@dataclass(frozen=True)
class EpisodeRules:
    segments: SegmentRules = field(default_factory=SegmentRules)
    min_events: int = 3
    """A shorter segment is not worth a summary of its own."""
    window: int = 500
    """How many events before the trigger are read at most: a longer stretch is proposed truncated."""


async def episode_proposals(event: Event, log: LogView, rules: EpisodeRules) -> list[Proposal]:
    """The episodes `event` closes: none unless it ends the session or follows a long pause."""
    if is_derived(event) or not await _closes_a_stretch(event, log, rules):
        return []
    window = await log.session_events(event.session, max(0, event.seq - 1 - rules.window), event.seq - 1)
    content = [e for e in window if not is_derived(e)]
    if not content or content[-1].type == SESSION_ENDED:
        return []  # the stretch before was closed (and proposed) by that `session.ended`
    stretch = last_stretch(segment(content, rules.segments))
    return [_proposal(part) for part in stretch if len(part.events) >= rules.min_events]


async def _closes_a_stretch(event: Event, log: LogView, rules: EpisodeRules) -> bool:
    if event.type == SESSION_ENDED:
        return True
    for seq in range(event.seq - 1, max(0, event.seq - 1 - _DERIVED_LOOKBACK), -1):
        previous = await log.event(event.session, seq)
        if previous is None:
            return False
        if not is_derived(previous):
            return gap_between(previous, event) > rules.segments.gap_s
    return False


def _proposal(part: Segment) -> Proposal:
    events = part.events
    texts = tuple(event_text(e) for e in events)
    first, last = events[0], events[-1]
    span = f"events {first.seq}-{last.seq} of session {first.session}"
    draft = extractive(texts, fallback_title=f"Episode: {span}")
    return Proposal(
        candidate_type="episode",
        cited=tuple(cite(e) for e in events),
        texts=texts,
        summary=draft,
        confidence=CONFIDENCE,
        method=METHOD,
        purpose=f"One cited summary of {span} ({len(events)} events, {first.ts} to {last.ts}).",
        about=_subjects(events),
    )


def _subjects(events: list[Event]) -> tuple[tuple[str, str], ...]:
    """The entities the episode's events name (`about` lists, asserted entities), first seen first."""
    seen: dict[tuple[str, str], None] = {}
    for event in events:
        for field_name in ("about", "entities"):
            items = event.payload.get(field_name)
            for item in items if isinstance(items, list) else []:
                if isinstance(item, dict):
                    name, kind = item.get("name"), item.get("entity_type")
                    if _is_subject(name, kind):
                        seen.setdefault((str(name), str(kind)), None)
    return tuple(list(seen)[:20])


def _is_subject(name: object, kind: object) -> bool:
    """Fits `SubjectRef` (an opaque payload may name anything; the candidate's schema is strict)."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= 512
        and isinstance(kind, str)
        and _SNAKE_CASE.fullmatch(kind) is not None
    )
