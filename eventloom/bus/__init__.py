"""NATS mechanics: the embedded server, connections, the stream layout and pull consumers."""
