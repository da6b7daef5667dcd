"""The claims pack: observations (what was seen), claims (what an agent concluded, with confidence and
basis), contradictions between claims and the resolutions that settle them, built on the public plug-in
API only.

`events` holds its event types, `model` what its read model writes, `reads` what it answers. See
docs/claims.md.

The names in `__all__` are imported on first use (PEP 562), so importing the package stays light: the
event-types entry point imports `events`, and with it this package, in every process that appends.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.packs.claims.client import ClaimsClient

_LAZY = {"ClaimsClient": "gateway.packs.claims.client"}
__all__ = ["ClaimsClient"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
