"""Reads that see the caller's own writes: the newest position each caller appended, per session.

A read tool given no `after` waits for the caller's own last append (in the session it asks about, or its
newest anywhere when it asks across sessions), so an agent that appends and then asks sees its write without
knowing about positions. The memory is bounded: the callers heard from least recently, and each caller's
sessions written least recently, are forgotten first (a forgotten write is only not waited for).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

from eventloom.position import Position

MAX_CALLERS: Final = 1024
MAX_SESSIONS_PER_CALLER: Final = 64


class OwnWrites:
    def __init__(self, max_callers: int = MAX_CALLERS, max_sessions: int = MAX_SESSIONS_PER_CALLER) -> None:
        self.max_callers = max_callers
        self.max_sessions = max_sessions
        self._written: OrderedDict[str, OrderedDict[str, Position]] = OrderedDict()

    def wrote(self, caller: str, position: Position) -> None:
        sessions = self._written.pop(caller, None) or OrderedDict()
        known = sessions.pop(position.session, None)
        sessions[position.session] = position if known is None or position.seq >= known.seq else known
        while len(sessions) > self.max_sessions:
            sessions.popitem(last=False)
        self._written[caller] = sessions
        while len(self._written) > self.max_callers:
            self._written.popitem(last=False)

    def latest(self, caller: str, session: str | None) -> Position | None:
        """The caller's newest write in `session`, or anywhere when `session` is None."""
        sessions = self._written.get(caller)
        if not sessions:
            return None
        if session is None:
            return next(reversed(sessions.values()))
        return sessions.get(session)


def written_position(answer: Any) -> Position | None:
    """The position a tool's answer says it appended at: its `position`, else its `citation`."""
    if not isinstance(answer, dict):
        return None
    position = answer.get("position")
    if isinstance(position, str):
        return Position.parse(position, "position")
    session, seq = answer.get("session"), answer.get("seq")
    citation = answer.get("citation")
    if isinstance(citation, str) and isinstance(session, str) and isinstance(seq, int) and seq > 0:
        return Position(session=session, seq=seq)
    return None
