"""`provision_neo4j`: a Neo4j server to use, from the best source this machine has.

In order: the server `NEO4J_URI` names (with `NEO4J_USER`, `NEO4J_PASSWORD`); a `neo4j:5.26-community`
container through testcontainers when a Docker engine answers; a local server from Maven Central jars when
`java` 17+ and `mvn` exist. Otherwise `Neo4jUnavailable` says what is missing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from readmodels.neo4j.local.endpoint import Neo4jEndpoint, Neo4jUnavailable, wait_until_answering
from readmodels.neo4j.local.server import LocalNeo4j, missing_tools

IMAGE: Final = "neo4j:5.26-community"
ENV_TIMEOUT_S: Final = 15


def docker_answers(timeout_s: float = 2.0) -> bool:
    """True when a Docker engine responds (quickly False when there is no socket at all)."""
    if not os.environ.get("DOCKER_HOST") and not Path("/var/run/docker.sock").exists():
        return False
    try:
        import docker  # noqa: PLC0415  (only needed when an engine may be there)

        client = docker.from_env(timeout=int(max(1, timeout_s)))
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


@contextlib.contextmanager
def _container() -> Iterator[Neo4jEndpoint]:
    from testcontainers.community.neo4j import Neo4jContainer  # noqa: PLC0415

    password = secrets.token_urlsafe(18)
    container: Any = Neo4jContainer(image=IMAGE, password=password)
    with container:
        endpoint = Neo4jEndpoint(
            uri=container.get_connection_url(), user="neo4j", password=password, source="testcontainers"
        )
        wait_until_answering(endpoint, 120)
        yield endpoint


@contextlib.contextmanager
def provision_neo4j(*, page_cache_mib: int = 512, heap: str = "2g") -> Iterator[Neo4jEndpoint]:
    """A running Neo4j for the duration of the block (stopped after, unless it came from `NEO4J_URI`)."""
    uri = os.environ.get("NEO4J_URI")
    if uri:
        endpoint = Neo4jEndpoint(
            uri=uri,
            user=os.environ.get("NEO4J_USER") or "neo4j",
            password=os.environ.get("NEO4J_PASSWORD", ""),
            source="env",
        )
        wait_until_answering(endpoint, ENV_TIMEOUT_S)
        yield endpoint
        return
    if docker_answers():
        with _container() as endpoint:
            yield endpoint
        return
    missing = missing_tools()
    if missing is not None:
        raise Neo4jUnavailable(f"no NEO4J_URI, no Docker engine, and {missing}")
    with LocalNeo4j(page_cache_mib=page_cache_mib, heap=heap) as server:
        yield server.endpoint
