"""The edge of Eventloom: the node that wires a deployment, and the `eventloom` CLI."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eventloom-memory")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
