"""What an event says, as plain text and as a bag of topic words: the raw material of episodes.

Only the payload's human fields are read (titles, summaries, commands ...): identifiers, hashes and
free-form `properties` would make every event look alike or unlike for the wrong reasons.
"""

from __future__ import annotations

import re
from typing import Any, Final

from eventloom.event import Event

DERIVED_PREFIXES: Final = ("consolidation.", "inference.", "causal.")
"""Events producers derive: never episode content, never a time reference (a producer appends late)."""
TEXT_LIMIT: Final = 500
HEADLINE_LIMIT: Final = 120
# In the order they are read: the first fields name the event best, so they lead its text.
_TEXT_FIELDS: Final = (
    "title",
    "subject",
    "summary",
    "text",
    "goal",
    "description",
    "decision",
    "outcome",
    "explanation",
    "cause",
    "rationale",
    "details",
    "statement",
    "reason",
    "command",
    "tool",
    "path",
    "symbol",
)
_WORD: Final = re.compile(r"[a-z0-9]+")
_STOPWORD_LIST: Final = (
    "the and for with that this from into onto was were are has have had not but its it's then than "
    "when what which who will would should could can may one two all any our out per via use used "
    "using after before again also just now new old run ran"
)
_STOPWORDS: Final = frozenset(_STOPWORD_LIST.split())


def is_derived(event: Event) -> bool:
    return event.type.startswith(DERIVED_PREFIXES)


def event_text(event: Event) -> str:
    """The event's human fields, joined; a fact's entities and relations spelled out; at most 500 chars."""
    payload = event.payload
    parts = [value.strip() for name in _TEXT_FIELDS if isinstance(value := payload.get(name), str)]
    parts.extend(_fact_text(payload))
    text = " ".join(part for part in parts if part)
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "\u2026"


def _fact_text(payload: dict[str, Any]) -> list[str]:
    parts: list[str] = []
    for entity in _dicts(payload.get("entities")):
        name, summary = entity.get("name"), entity.get("summary")
        if isinstance(name, str):
            parts.append(f"{name}: {summary}" if isinstance(summary, str) and summary else name)
    for relation in _dicts(payload.get("relations")):
        ends = (relation.get("source"), relation.get("relation_type"), relation.get("target"))
        if all(isinstance(end, str) for end in ends):
            parts.append(" ".join(str(end) for end in ends))
    return parts


def _dicts(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def topic_words(text: str) -> frozenset[str]:
    """Lower-case words of three or more letters, common function words left out."""
    return frozenset(
        word for word in _WORD.findall(text.lower()) if len(word) >= 3 and word not in _STOPWORDS
    )


def headline(text: str) -> str:
    """The first line of `text`, at most 120 characters (a candidate's title must be one line)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= HEADLINE_LIMIT else first[: HEADLINE_LIMIT - 1] + "\u2026"
