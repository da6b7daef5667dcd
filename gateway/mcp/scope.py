"""Which tools a token limited to some sessions may ask without a `session`, and their answers cut to its
rows (`gateway.access.scope`, shared with the web view).

Tools whose every row carries its citation may be asked without a `session` by such a token
(`answers_scoped_by_rows`): their answer is the rows it may see. Every other tool needs a `session` (or a
token that may touch every session) for a question across sessions, since an aggregate (a count, an
average) carries no row to cut.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mcp.server.mcpserver import MCPServer

from gateway.access.scope import OutOfScopeError, cut_to_scope
from gateway.mcp.failures import ToolFailure

ROWS_SCOPED_ATTRIBUTE: Final = "eventloom_rows_scoped"


def answers_scoped_by_rows(server: MCPServer, *names: str) -> None:
    """Declare that the answers of these tools cite the event of every row they hold, so that a token
    limited to some sessions may ask them without a `session` and gets the rows it may see."""
    declared: set[str] = getattr(server, ROWS_SCOPED_ATTRIBUTE, set())
    declared.update(names)
    setattr(server, ROWS_SCOPED_ATTRIBUTE, declared)


def rows_scoped(server: MCPServer) -> frozenset[str]:
    return frozenset(getattr(server, ROWS_SCOPED_ATTRIBUTE, ()))


def scoped_answer(answer: Any, may_touch: Callable[[str], bool]) -> Any:
    """`answer` without the rows of sessions `may_touch` refuses; `forbidden` if it is such a row, or quotes
    one."""
    try:
        return cut_to_scope(answer, may_touch)
    except OutOfScopeError as exc:
        raise ToolFailure("forbidden", f"{exc}; ask about a session of yours") from None
