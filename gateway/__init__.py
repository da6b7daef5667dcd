"""The edge of Eventloom: the node that wires a deployment, and the `eventloom` CLI."""
