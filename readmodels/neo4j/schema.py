"""Neo4j schema: constraints, lookup, full-text and vector indexes as named, checksummed migrations.

Neo4j needs no table per relationship type, so typed relationships need no DDL. Schema statements cannot
share a transaction with writes: each runs on its own and is idempotent (`IF NOT EXISTS`), and the
`Migration` node is written after all of its statements succeeded, so an interrupted migration is simply
applied again. `schema_plan()` is pure (for `eventloom schema-plan`); `apply_migrations()` applies what is
missing and waits for the new indexes to come online.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from neo4j.exceptions import Neo4jError

from readmodels.graph.cypher.io import ExecuteAsync
from readmodels.graph.migrations import applied_at, missing, plan_of
from readmodels.graph.protocol import GraphStoreError, PlannedMigration

DEFAULT_VECTOR_DIMENSIONS: Final = 384
"""all-MiniLM-L6-v2's width, and the `hash` embedder's default."""
MAX_VECTOR_DIMENSIONS: Final = 4096
"""Neo4j 5.26's limit for a vector index."""
INDEX_WAIT_S: Final = 300
INDEX_POLL_S: Final = 0.1
SCHEMA_ATTEMPTS: Final = 10
_ALREADY_THERE: Final = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
    }
)
"""What a statement `IF NOT EXISTS` may still raise when another opener created the same object a moment
before: the object is there, as asked."""
_RACED: Final = frozenset({"Neo.ClientError.Schema.ConstraintValidationFailed"})
"""Two openers `MERGE` the same `Migration` node: the loser's next try finds it."""
_NAME_TAKEN: Final = "Neo.ClientError.Schema.IndexWithNameAlreadyExists"
_NAMED_CONSTRAINT: Final = re.compile(r"CREATE CONSTRAINT (\w+) IF NOT EXISTS ")
ORPHAN_AFTER_ATTEMPTS: Final = 6
"""A constraint's name held by an index without a constraint for this many tries (about two seconds) is a
leftover, not another opener's creation in progress (that takes milliseconds on the labels of a fresh
schema): it is dropped and the constraint created in its place, in one transaction."""

RunTogether = Callable[[Sequence[str]], Awaitable[None]]
"""Runs schema statements in one explicit transaction (all or none)."""

_log = logging.getLogger(__name__)

_UNIQUE: Final = (
    ("migration_name", "(m:Migration)", "m.name"),
    ("session_id", "(s:Session)", "s.id"),
    ("event_uid", "(e:Event)", "e.uid"),
    ("event_session_seq", "(e:Event)", "(e.session, e.seq)"),
    ("entity_uid", "(e:Entity)", "e.uid"),
    ("entity_version", "(e:Entity)", "(e.session, e.name, e.entity_type, e.valid_from)"),
    ("entity_key_key", "(k:EntityKey)", "k.key"),
    ("source_uid", "(s:Source)", "s.uid"),
    ("checkpoint_id", "(c:Checkpoint)", "c.id"),
)
_LOOKUPS: Final = (
    ("entity_key", "(e:Entity)", "e.key"),
    ("entity_session_type", "(e:Entity)", "e.session, e.entity_type"),
    ("entity_session_name", "(e:Entity)", "e.session, e.name"),
    ("entity_key_name_key", "(k:EntityKey)", "k.name_key"),
    ("source_session_path", "(s:Source)", "s.session, s.path"),
    ("relates_uid", "()-[r:RELATES]-()", "r.uid"),
    ("relates_edge_id", "()-[r:RELATES]-()", "r.edge_id"),
    ("relates_session", "()-[r:RELATES]-()", "r.session"),
    ("relates_key", "()-[r:RELATES]-()", "r.key"),
    ("relates_triple", "()-[r:RELATES]-()", "r.triple"),
)
_DOC_KEYS: Final = (
    "CREATE CONSTRAINT keyword_doc_uid IF NOT EXISTS FOR (d:KeywordDoc) REQUIRE d.uid IS UNIQUE",
    "CREATE CONSTRAINT vector_doc_uid IF NOT EXISTS FOR (d:VectorDoc) REQUIRE d.uid IS UNIQUE",
    "CREATE CONSTRAINT doc_checkpoint_key IF NOT EXISTS FOR (c:DocCheckpoint) "
    "REQUIRE (c.model, c.projector, c.session) IS UNIQUE",
    "CREATE INDEX vector_doc_tag IF NOT EXISTS FOR (d:VectorDoc) ON (d.tag)",
    "CREATE INDEX vector_doc_tag_session IF NOT EXISTS FOR (d:VectorDoc) ON (d.tag, d.session)",
)


def _migrations(vector_dimensions: int) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return (
        (
            "0001_identity_constraints",
            tuple(
                f"CREATE CONSTRAINT {name} IF NOT EXISTS FOR {pattern} REQUIRE {key} IS UNIQUE"
                for name, pattern, key in _UNIQUE
            ),
        ),
        (
            "0002_lookup_indexes",
            tuple(
                f"CREATE INDEX {name} IF NOT EXISTS FOR {pattern} ON ({keys})"
                for name, pattern, keys in _LOOKUPS
            ),
        ),
        (
            "0003_entity_fulltext",
            ("CREATE FULLTEXT INDEX entity_text IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.summary]",),
        ),
        (
            "0004_entity_vector",
            (
                "CREATE VECTOR INDEX entity_embedding IF NOT EXISTS FOR (e:Entity) ON (e.embedding) "
                f"OPTIONS {{indexConfig: {{`vector.dimensions`: {vector_dimensions}, "
                "`vector.similarity_function`: 'cosine'}}",
            ),
        ),
        ("0005_memory_doc_keys", _DOC_KEYS),
        (
            "0006_keyword_doc_fulltext",
            (  # 'english' stems with Porter's algorithm, like the embedded FTS5 index
                "CREATE FULLTEXT INDEX keyword_doc_text IF NOT EXISTS FOR (d:KeywordDoc) "
                "ON EACH [d.title, d.text] OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
            ),
        ),
        (
            "0007_vector_doc_embedding",
            (  # unquantized: int8 scores of sparse vectors (the `hash` embedder's) misrank candidates
                "CREATE VECTOR INDEX vector_doc_embedding IF NOT EXISTS FOR (d:VectorDoc) ON (d.embedding) "
                f"OPTIONS {{indexConfig: {{`vector.dimensions`: {vector_dimensions}, "
                "`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}}",
            ),
        ),
        (
            "0008_edges_join_entities",
            (  # relations join entities (`EntityKey`) since this one: a causal hop finds them by name
                "CREATE INDEX entity_key_session_name IF NOT EXISTS FOR (k:EntityKey) ON (k.session, k.name)",
            ),
        ),
        (
            "0009_keyword_doc_context",
            (  # a turn's words borrowed from the turns before it (`readmodels.keyword.context`) are searched
                # too; its earlier turns are found by session and seq. Documents written before have no
                # context until `eventloom rebuild keyword`. A new name: an opener still applying 0006
                # meanwhile finds no other index under its name (IndexWithNameAlreadyExists)
                "CREATE FULLTEXT INDEX keyword_doc_fulltext IF NOT EXISTS FOR (d:KeywordDoc) ON EACH "
                "[d.title, d.text, d.context] OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
                "DROP INDEX keyword_doc_text IF EXISTS",
                "CREATE INDEX keyword_doc_session_seq IF NOT EXISTS FOR (d:KeywordDoc) ON (d.session, d.seq)",
            ),
        ),
    )


_BULK_KEYS: Final = frozenset(
    {
        "migration_name",
        "session_id",
        "event_uid",
        "entity_uid",
        "entity_key_key",
        "source_uid",
        "checkpoint_id",
    }
)
"""The constraints a bulk load keeps: the keys relationship rows find their ends by (and `Migration`'s)."""
_GRAPH_MIGRATIONS: Final = (
    "0001_identity_constraints",
    "0002_lookup_indexes",
    "0003_entity_fulltext",
    "0004_entity_vector",
)


def bulk_deferred() -> tuple[list[str], list[str]]:
    """What a bulk load of an empty graph drops and builds again once the rows are in: (the `DROP`
    statements, the migrations they belong to).

    Every index updated row by row is cost during a load; built afterwards, in one pass over the stored
    graph, it is cheaper. Kept: the unique keys relationship rows are matched by. The migrations' records
    are deleted before anything is dropped, so a load interrupted at any point leaves a database whose next
    `open` (`apply_migrations`) builds the missing objects again.
    """
    drops = [f"DROP CONSTRAINT {name} IF EXISTS" for name, _, _ in _UNIQUE if name not in _BULK_KEYS]
    drops += [f"DROP INDEX {name} IF EXISTS" for name, _, _ in _LOOKUPS]
    drops += ["DROP INDEX entity_text IF EXISTS", "DROP INDEX entity_embedding IF EXISTS"]
    return drops, list(_GRAPH_MIGRATIONS)


def schema_plan(vector_dimensions: int = DEFAULT_VECTOR_DIMENSIONS) -> list[PlannedMigration]:
    """Every migration, in order, with its checksum. Pure: connects to nothing.

    The vector width is part of migrations 0004 and 0007: changing it changes their checksums, and the
    stores refuse to open on a database built with another width (re-embedding means a new index, not an
    edited one).
    """
    if not isinstance(vector_dimensions, int) or not 1 <= vector_dimensions <= MAX_VECTOR_DIMENSIONS:
        raise ValueError(f"vector_dimensions: expected an integer from 1 to {MAX_VECTOR_DIMENSIONS}")
    return plan_of(_migrations(vector_dimensions))


async def applied_migrations(execute: ExecuteAsync) -> dict[str, str]:
    """name -> recorded checksum of the migrations applied to this database."""
    rows = await execute("MATCH (m:Migration) RETURN m.name AS name, m.checksum AS checksum", {})
    return {str(row["name"]): str(row["checksum"]) for row in rows}


async def apply_migrations(
    execute: ExecuteAsync, together: RunTogether, plan: list[PlannedMigration]
) -> list[str]:
    """Apply the missing migrations (statements auto-committed, one by one); return the names applied.

    `execute` must run each statement in its own auto-commit transaction (Neo4j refuses schema changes
    in a transaction that also writes data); `together` runs the repair of a leftover index (a drop and a
    create) as one schema transaction. Raises `MigrationChecksumError` before applying anything
    when an applied migration's checksum differs from the plan's.
    """
    todo = missing(plan, await applied_migrations(execute))
    applied: list[str] = []
    for migration in todo:
        if applied and migration.name in await applied_migrations(execute):
            continue  # another opener applied it meanwhile: an old migration's objects are not made again
        applied.append(migration.name)
        for statement in migration.statements:
            await _concurrently_safe(execute, together, statement, {})
        await _concurrently_safe(
            execute,
            together,
            "MERGE (m:Migration {name: $name}) SET m.checksum = $checksum, m.statements = $count, "
            "m.applied_at = $at",
            {
                "name": migration.name,
                "checksum": migration.checksum,
                "count": migration.statement_count,
                "at": applied_at(),
            },
        )
    if todo:
        await _indexes_online(execute)
    return applied


async def _concurrently_safe(
    execute: ExecuteAsync, together: RunTogether, statement: str, params: dict[str, object]
) -> None:
    """Run one schema statement while other processes may run the same ones.

    A node opens its graph, keyword and vector stores at once, each applying the shared schema: Neo4j then
    reports deadlocks between the schema transactions, or that an object another opener just created exists.
    A deadlock is retried after a random pause (so the openers fall out of step); "it exists" is success.
    A `CREATE CONSTRAINT` whose name an index already holds meets either another opener's constraint being
    built or the index an interrupted creation left behind (Neo4j builds a constraint's index first and
    does not always drop it when the constraint fails): waited for, then replaced (`_replace_leftover`).
    """
    constraint = _NAMED_CONSTRAINT.match(statement)
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            await execute(statement, dict(params))
            return
        except Neo4jError as exc:
            if exc.code in _ALREADY_THERE:
                return
            if exc.code == _NAME_TAKEN and constraint is not None:
                if await _constraint_exists(execute, constraint.group(1)):
                    return
                if attempt >= ORPHAN_AFTER_ATTEMPTS:
                    await _replace_leftover(execute, together, constraint.group(1), statement)
            elif not (exc.is_retryable() or exc.code in _RACED):
                raise
            if attempt == SCHEMA_ATTEMPTS:
                raise
        await asyncio.sleep(random.uniform(0.05, 0.25) * attempt)


async def _indexes_online(execute: ExecuteAsync) -> None:
    """Wait until every index is online, asking rather than `CALL db.awaitIndexes`: that procedure holds a
    schema lock while it waits, which another opener replacing a leftover index waits for in turn, and
    neither moves until its timeout."""
    deadline = asyncio.get_running_loop().time() + INDEX_WAIT_S
    while True:
        pending = await execute(
            "SHOW INDEXES YIELD name, state WHERE state <> 'ONLINE' RETURN name, state ORDER BY name", {}
        )
        failed = [str(row["name"]) for row in pending if row["state"] == "FAILED"]
        if failed:
            raise GraphStoreError(f"Neo4j could not build the indexes {', '.join(failed)} (SHOW INDEXES)")
        if not pending:
            return
        if asyncio.get_running_loop().time() > deadline:
            names = ", ".join(str(row["name"]) for row in pending)
            raise GraphStoreError(f"Neo4j indexes still not online after {INDEX_WAIT_S} s: {names}")
        await asyncio.sleep(INDEX_POLL_S)


async def _constraint_exists(execute: ExecuteAsync, name: str) -> bool:
    return bool(await execute("SHOW CONSTRAINTS YIELD name WHERE name = $name RETURN name", {"name": name}))


async def _replace_leftover(execute: ExecuteAsync, together: RunTogether, name: str, statement: str) -> None:
    """Drop the index named like the constraint `name`, when no constraint owns it (a leftover), and create
    the constraint, in one transaction (a separate `DROP` deadlocked with the other openers doing the same
    in testing). A failure (another opener replaced it first, a deadlock) leaves the caller's next try to
    see the outcome."""
    orphans = await execute(
        "SHOW INDEXES YIELD name, owningConstraint WHERE name = $name AND owningConstraint IS NULL "
        "RETURN name",
        {"name": name},
    )
    if not orphans:
        return
    _log.warning("replacing index %s: a constraint's name, left without its constraint", name)
    try:
        await together([f"DROP INDEX `{name}` IF EXISTS", statement])
    except Neo4jError as exc:
        _log.info("replacing index %s: %s (tried again)", name, exc.code)
