"""NATS mechanics: the embedded server, connections, the stream layout, pull consumers and peer status.

The names in `__all__` are imported on first use (PEP 562): a connection or the stream layout does not
import the heartbeats too.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eventloom.bus.heartbeat import HeartbeatPublisher, PeerWatcher
    from eventloom.bus.peers import Heartbeat, PeerState, PeerStatus, PeerTable, read_peers

_LAZY: dict[str, str] = {
    "Heartbeat": "eventloom.bus.peers",
    "HeartbeatPublisher": "eventloom.bus.heartbeat",
    "PeerState": "eventloom.bus.peers",
    "PeerStatus": "eventloom.bus.peers",
    "PeerTable": "eventloom.bus.peers",
    "PeerWatcher": "eventloom.bus.heartbeat",
    "read_peers": "eventloom.bus.peers",
}

__all__ = [
    "Heartbeat",
    "HeartbeatPublisher",
    "PeerState",
    "PeerStatus",
    "PeerTable",
    "PeerWatcher",
    "read_peers",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # once: later lookups do not come back here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
