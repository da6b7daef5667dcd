"""A package's public names imported on first use (PEP 562), so that importing one of its modules (the CLI
does, for every command) does not import its whole API with it.

A package lists its names in `__all__`, imports them under `TYPE_CHECKING` for the type checker and the
import contracts, and maps each to the module that defines it:

    __getattr__, __dir__ = lazy_exports(__name__, {"Event": "eventloom.event", ...}, __all__)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any


def lazy_exports(
    package: str, homes: Mapping[str, str], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module `__getattr__` and `__dir__` of `package`, whose name `n` lives in module `homes[n]`."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(home), name)
        vars(sys.modules[package])[name] = value  # once: later lookups do not come back here
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *public})

    return __getattr__, __dir__
