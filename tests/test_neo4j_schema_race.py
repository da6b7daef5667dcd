"""A node opens its graph, keyword and vector stores at once on one Neo4j: on a database without the schema,
all of them apply the same migrations concurrently, and every one of them must open."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest
from neo4j import AsyncGraphDatabase

from gateway.packs.workflow.neo4j_store import Neo4jWorkflowStore
from readmodels.neo4j.graph_store import Neo4jGraphStore
from readmodels.neo4j.keyword_store import Neo4jKeywordStore
from readmodels.neo4j.schema import schema_plan
from readmodels.neo4j.vector_store import Neo4jVectorStore
from tests.test_memory_doc_backends import keyword_on, vector_on

if TYPE_CHECKING:
    from readmodels.neo4j.local import Neo4jEndpoint

pytestmark = pytest.mark.anyio


async def wipe_schema(endpoint: Neo4jEndpoint) -> None:
    """The database as a fresh server has it: no constraint, no index, no migration recorded."""
    auth = (endpoint.user, endpoint.password)
    async with AsyncGraphDatabase.driver(endpoint.uri, auth=auth) as driver, driver.session() as session:
        await (await session.run("MATCH (m:Migration) DETACH DELETE m")).consume()
        names = [r["name"] async for r in await session.run("SHOW CONSTRAINTS YIELD name")]
        for name in names:
            await (await session.run(f"DROP CONSTRAINT `{name}` IF EXISTS")).consume()
        indexes = await session.run("SHOW INDEXES YIELD name, type WHERE type <> 'LOOKUP' RETURN name")
        for name in [r["name"] async for r in indexes]:
            await (await session.run(f"DROP INDEX `{name}` IF EXISTS")).consume()


async def rows_of(endpoint: Neo4jEndpoint, cypher: str) -> list[dict[str, object]]:
    auth = (endpoint.user, endpoint.password)
    async with AsyncGraphDatabase.driver(endpoint.uri, auth=auth) as driver, driver.session() as session:
        return [dict(row) async for row in await session.run(cypher)]


async def recorded_migrations(endpoint: Neo4jEndpoint) -> list[str]:
    rows = await rows_of(endpoint, "MATCH (m:Migration) RETURN m.name AS name ORDER BY name")
    return [str(row["name"]) for row in rows]


async def test_stores_opening_together_on_a_fresh_schema_all_open(neo4j_endpoint: Neo4jEndpoint) -> None:
    expected = sorted(migration.name for migration in schema_plan())
    for _ in range(2):  # the race is timing-dependent: run it twice
        await wipe_schema(neo4j_endpoint)
        stores: list[Neo4jGraphStore | Neo4jKeywordStore | Neo4jVectorStore] = [
            Neo4jGraphStore(neo4j_endpoint.uri, user=neo4j_endpoint.user, password=neo4j_endpoint.password),
            keyword_on(neo4j_endpoint),
            vector_on(neo4j_endpoint),
            keyword_on(neo4j_endpoint),
        ]
        try:
            await asyncio.wait_for(asyncio.gather(*(store.open() for store in stores)), 120)
            assert await recorded_migrations(neo4j_endpoint) == expected
        finally:
            for store in stores:
                await store.close()


async def indexes_without_constraint(endpoint: Neo4jEndpoint, names: set[str]) -> list[str]:
    rows = await rows_of(endpoint, "SHOW INDEXES YIELD name, owningConstraint WHERE owningConstraint IS NULL")
    return sorted(str(row["name"]) for row in rows if row["name"] in names)


async def test_an_index_left_by_an_interrupted_constraint_creation_does_not_block_opening(
    neo4j_endpoint: Neo4jEndpoint,
) -> None:
    """Neo4j builds a unique constraint's index before the constraint, and a creation that fails (a client
    gone, a deadlock) can leave that index behind under the constraint's name: every later
    `CREATE CONSTRAINT ... IF NOT EXISTS` then fails with IndexWithNameAlreadyExists (seen once on CI, after
    which every test opening the workflow model on that server failed). Openers, two at once, drop the
    leftover and create the constraint."""
    await wipe_schema(neo4j_endpoint)
    leftovers = {
        "event_uid": "(e:Event) ON (e.uid)",
        "workflow_workflowcheckpoint_key": "(c:WorkflowCheckpoint) ON (c.key)",
    }
    for name, target in leftovers.items():
        await rows_of(neo4j_endpoint, f"CREATE INDEX {name} FOR {target}")
    assert await indexes_without_constraint(neo4j_endpoint, set(leftovers)) == sorted(leftovers)
    uri, user, password = neo4j_endpoint.uri, neo4j_endpoint.user, neo4j_endpoint.password
    stores: list[Neo4jGraphStore | Neo4jWorkflowStore] = [
        *(Neo4jGraphStore(uri, user=user, password=password) for _ in range(2)),
        *(Neo4jWorkflowStore(uri, user=user, password=password) for _ in range(2)),
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(store.open() for store in stores)), 120)
    finally:
        for store in stores:
            await store.close()
    assert await indexes_without_constraint(neo4j_endpoint, set(leftovers)) == []
    constraints = {row["name"] for row in await rows_of(neo4j_endpoint, "SHOW CONSTRAINTS YIELD name")}
    assert set(leftovers) <= constraints
    recorded = await recorded_migrations(neo4j_endpoint)
    assert {"0001_identity_constraints", "workflow_0001_keys"} <= set(recorded)
