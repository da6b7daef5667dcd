"""Where a Neo4j server answers, and waiting until it does (with a short connection timeout)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field


class Neo4jUnavailable(Exception):
    """No Neo4j server could be provisioned or reached; the message says why."""


@dataclass(frozen=True)
class Neo4jEndpoint:
    uri: str
    user: str
    password: str = field(repr=False)
    source: str  # "env", "testcontainers" or "local"

    def environment(self) -> dict[str, str]:
        """The variables that point Eventloom at this server."""
        return {"NEO4J_URI": self.uri, "NEO4J_USER": self.user, "NEO4J_PASSWORD": self.password}


def wait_until_answering(endpoint: Neo4jEndpoint, timeout_s: float) -> None:
    """Return once the server accepts a connection and a query; `Neo4jUnavailable` after `timeout_s`.

    `verify_connectivity` with a 2 s connection timeout, retried: the driver's own retries would make a
    wrong address take ~30 s to report.
    """
    import neo4j  # noqa: PLC0415 (the driver only when waited for: `eventloom --help` names the version)
    from neo4j.exceptions import AuthError, Neo4jError, ServiceUnavailable  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    last = "no attempt"
    while True:
        try:
            with neo4j.GraphDatabase.driver(
                endpoint.uri, auth=(endpoint.user, endpoint.password), connection_timeout=2
            ) as driver:
                driver.verify_connectivity()
                return
        except AuthError as exc:
            raise Neo4jUnavailable(
                f"Neo4j at {endpoint.uri} refused the credentials: {exc.message}"
            ) from None
        except (ServiceUnavailable, Neo4jError, OSError) as exc:
            last = str(exc)
        if time.monotonic() >= deadline:
            raise Neo4jUnavailable(f"Neo4j at {endpoint.uri} did not answer within {timeout_s:.0f}s: {last}")
        time.sleep(0.5)
