"""NATS mechanics: the embedded server, connections, the stream layout, pull consumers and peer status."""

from eventloom.bus.heartbeat import HeartbeatPublisher, PeerWatcher
from eventloom.bus.peers import Heartbeat, PeerState, PeerStatus, PeerTable, read_peers

__all__ = [
    "Heartbeat",
    "HeartbeatPublisher",
    "PeerState",
    "PeerStatus",
    "PeerTable",
    "PeerWatcher",
    "read_peers",
]
