"""The query service: the process that owns the read models answers memory queries over NATS."""
