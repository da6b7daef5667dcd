"""Scope that follows the data: every answer is cut to the sessions the caller may touch, row by row.

The check of a call's `session` argument (server.py) is the first gate; this is the second, and the one
that cannot be fooled by an argument a tool ignores. An answer is walked as JSON: a row (an object) that
names a session outside the caller's scope, by a `session` field or by an `eventloom://<session>/...`
citation of its own, is dropped (from a list) or emptied (null, as a field); a list of citations loses the
foreign ones. Free text that cites a foreign session, or an answer that is itself a foreign row, refuses
the whole call: cutting a sentence would still tell what it said.

Tools whose every row carries its citation may be asked without a `session` by a token limited to some
sessions (`answers_scoped_by_rows`): their answer is the rows that token may see. Every other tool needs a
`session` (or a token that may touch every session) for a question across sessions, since an aggregate (a
count, an average) carries no row to cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

from mcp.server.mcpserver import MCPServer

from gateway.mcp.failures import ToolFailure

CITED_SESSION: Final = re.compile(r"eventloom://([A-Za-z0-9_-]{1,128})/")
_CITATION: Final = re.compile(r"eventloom://[A-Za-z0-9_-]{1,128}/\S*")
ROWS_SCOPED_ATTRIBUTE: Final = "eventloom_rows_scoped"
_DROPPED: Final = object()


def answers_scoped_by_rows(server: MCPServer, *names: str) -> None:
    """Declare that the answers of these tools cite the event of every row they hold, so that a token
    limited to some sessions may ask them without a `session` and gets the rows it may see."""
    declared: set[str] = getattr(server, ROWS_SCOPED_ATTRIBUTE, set())
    declared.update(names)
    setattr(server, ROWS_SCOPED_ATTRIBUTE, declared)


def rows_scoped(server: MCPServer) -> frozenset[str]:
    return frozenset(getattr(server, ROWS_SCOPED_ATTRIBUTE, ()))


def sessions_cited(text: str) -> list[str]:
    """The sessions of the `eventloom://` citations in `text`."""
    return CITED_SESSION.findall(text)


def scoped_answer(answer: Any, may_touch: Callable[[str], bool]) -> Any:
    """`answer` without the rows of sessions `may_touch` refuses; forbidden if it is such a row itself."""
    kept = _cut(answer, may_touch)
    if kept is _DROPPED:
        raise ToolFailure(
            "forbidden", "session: the answer comes from a session your token may not touch; ask of yours"
        )
    return kept


def _cut(value: Any, may_touch: Callable[[str], bool], in_list: bool = False) -> Any:
    if isinstance(value, dict):
        return _cut_object(value, may_touch, in_list)
    if isinstance(value, list):
        return [kept for item in value if (kept := _cut(item, may_touch, in_list=True)) is not _DROPPED]
    if isinstance(value, str) and "eventloom://" in value:
        foreign = [s for s in CITED_SESSION.findall(value) if not may_touch(s)]
        if not foreign:
            return value
        if _CITATION.fullmatch(value):
            return _DROPPED  # a citation is a row of its own: leave it out
        raise ToolFailure(
            "forbidden",
            "session: the answer quotes a session your token may not touch; ask with a `session` of yours",
        )
    return value


def _cut_object(row: dict[str, Any], may_touch: Callable[[str], bool], in_list: bool) -> Any:
    """A row of a list whose every object field was cut (a tool call and its result) is cut with them."""
    if not all(may_touch(session) for session in _own_sessions(row)):
        return _DROPPED
    cut = {key: _cut(item, may_touch) for key, item in row.items()}
    objects = [key for key, item in row.items() if isinstance(item, dict)]
    if in_list and objects and all(cut[key] is _DROPPED for key in objects):
        return _DROPPED
    return {key: None if item is _DROPPED else item for key, item in cut.items()}


def _own_sessions(row: dict[str, Any]) -> set[str]:
    """The sessions an object names as its own: its `session` field and the citations among its fields."""
    sessions: set[str] = set()
    for key, item in row.items():
        if key == "session" and isinstance(item, str):
            sessions.add(item)
        elif isinstance(item, str) and _CITATION.fullmatch(item):
            sessions.update(CITED_SESSION.findall(item))
    return sessions
