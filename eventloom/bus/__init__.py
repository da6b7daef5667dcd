"""NATS mechanics: the embedded server, connections, the stream layout, pull consumers and peer status.

The names in `__all__` are imported on first use (PEP 562): a connection or the stream layout does not
import the heartbeats too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventloom.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
