"""Who may call the gateway and what a call reaches: bearer tokens and their principals (`tokens`), and the
event log and memory service behind every tool and view (`backend`). Shared by the MCP gateway and the web
view, which it keeps independent of each other.

The names in `__all__` are imported on first use (PEP 562): the tokens alone (the CLI's `tokens`
commands) do not import the backend.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.lazy import lazy_exports

if TYPE_CHECKING:
    from gateway.access.backend import Backend
    from gateway.access.tokens import LOCAL_OPERATOR, Principal, TokenBook, TokenFileError, bearer_token

_LAZY: dict[str, str] = {
    "Backend": "gateway.access.backend",
    "LOCAL_OPERATOR": "gateway.access.tokens",
    "Principal": "gateway.access.tokens",
    "TokenBook": "gateway.access.tokens",
    "TokenFileError": "gateway.access.tokens",
    "bearer_token": "gateway.access.tokens",
}

__all__ = ["LOCAL_OPERATOR", "Backend", "Principal", "TokenBook", "TokenFileError", "bearer_token"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
