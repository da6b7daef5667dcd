"""Who may call the gateway and what a call reaches: bearer tokens and their principals (`tokens`), and the
event log and memory service behind every tool and view (`backend`). Shared by the MCP gateway and the web
view, which it keeps independent of each other."""

from gateway.access.backend import Backend
from gateway.access.tokens import LOCAL_OPERATOR, Principal, TokenBook, TokenFileError, bearer_token

__all__ = ["LOCAL_OPERATOR", "Backend", "Principal", "TokenBook", "TokenFileError", "bearer_token"]
