"""A real Neo4j for tests, benchmarks and `eventloom dev neo4j`: `NEO4J_URI`, else a Docker container,
else a local community server from Maven Central jars (see `provision`)."""

from readmodels.neo4j.local.endpoint import Neo4jEndpoint, Neo4jUnavailable, wait_until_answering
from readmodels.neo4j.local.provision import docker_answers, provision_neo4j
from readmodels.neo4j.local.server import NEO4J_VERSION, LocalNeo4j, missing_tools

__all__ = [
    "NEO4J_VERSION",
    "LocalNeo4j",
    "Neo4jEndpoint",
    "Neo4jUnavailable",
    "docker_answers",
    "missing_tools",
    "provision_neo4j",
    "wait_until_answering",
]
