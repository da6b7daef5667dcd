"""Scope that follows the data: an answer cut to the sessions a caller may touch, row by row.

Both front doors (MCP's tools, the web view's `/v1`) check the sessions a caller names first; this is the
second gate, the one an argument a handler ignores cannot fool. An answer is walked as JSON. A row (an
object) belongs to the sessions it names as its own: its `session` field, its own `eventloom://`
citations, the sessions of its provenance (`PROVENANCE`: the events it was made from), and those of the
objects in its fields (a tool call and its result are one row). A row of a session outside the scope is
dropped from its list, or refuses the whole answer when it is the answer; a list of citations loses the
foreign ones. Free text that quotes another session refuses the whole answer: cutting a sentence would
still tell what it said.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any, Final

from eventloom.errors import EventloomError

CITED_SESSION: Final = re.compile(r"eventloom://([A-Za-z0-9_-]{1,128})/")
_CITATION: Final = re.compile(r"eventloom://[A-Za-z0-9_-]{1,128}/\S*")
PROVENANCE: Final = frozenset({"source_events", "sources", "evidence", "citations", "supersedes"})
"""Fields that list what a row was made from: a row made from an event of another session carries its
data (a consolidation candidate's summary, a causal step's cause) even where it names none of it."""
_DROPPED: Final = object()


class OutOfScopeError(EventloomError):
    """The answer is, or quotes, data of a session the caller may not touch."""


def sessions_cited(text: str) -> list[str]:
    """The sessions of the `eventloom://` citations in `text`."""
    return CITED_SESSION.findall(text)


def sessions_of(row: dict[str, Any]) -> set[str]:
    """The sessions a row (a JSON object) carries data of: its own, its provenance's, its objects'."""
    return set(_own_sessions(row))


def cut_to_scope(answer: Any, may_touch: Callable[[str], bool]) -> Any:
    """`answer` (plain JSON values) without the rows of sessions `may_touch` refuses."""
    kept = _cut(answer, may_touch)
    if kept is _DROPPED:
        raise OutOfScopeError("session: the answer comes from a session your token may not touch")
    return kept


def _cut(value: Any, may_touch: Callable[[str], bool]) -> Any:
    if isinstance(value, dict):
        if not all(may_touch(session) for session in _own_sessions(value)):
            return _DROPPED
        return {key: _cut(item, may_touch) for key, item in value.items()}
    if isinstance(value, list):
        return [kept for item in value if (kept := _cut(item, may_touch)) is not _DROPPED]
    if isinstance(value, str) and "eventloom://" in value:
        if all(may_touch(session) for session in sessions_cited(value)):
            return value
        if _CITATION.fullmatch(value):
            return _DROPPED  # a citation is a row of its own: leave it out
        raise OutOfScopeError("session: the answer quotes a session your token may not touch")
    return value


def _own_sessions(row: dict[str, Any]) -> Iterator[str]:
    for key, item in row.items():
        if key == "session" and isinstance(item, str):
            yield item
        elif isinstance(item, str) and _CITATION.fullmatch(item):
            yield from sessions_cited(item)
        elif isinstance(item, dict):
            yield from _own_sessions(item)
        elif key in PROVENANCE and isinstance(item, list):
            for part in item:
                if isinstance(part, dict):
                    yield from _own_sessions(part)
                elif isinstance(part, str):
                    yield from sessions_cited(part)
