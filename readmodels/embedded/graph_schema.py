"""LadybugDB schema: named, idempotent migrations recorded as `Migration` nodes with checksums.

`schema_plan()` returns the plan (names, checksums, statements) without touching any database, for
`eventloom schema-plan`. `apply_migrations()` applies what is missing, one transaction per migration, and
refuses to go on when an applied migration's checksum no longer matches the code: a migration is never
edited in place, a new one is added instead. Typed relationship tables (one per relation type) are not
migrations: they are created on demand, inside the batch that first needs them, by `typed_rel_ddl`.
"""

from __future__ import annotations

import contextlib
from typing import Final

from readmodels.graph.cypher.io import Execute
from readmodels.graph.migrations import EDGES_JOIN_ENTITIES, applied_at, missing, outdated_graph, plan_of
from readmodels.graph.properties import (
    CITATION_TYPES,
    EDGE_TYPES,
    ENTITY_TYPES,
    EVENT_TYPES,
    OBSERVATION_TABLES,
    OBSERVATION_TYPES,
    PROJECTED_RELATION_TYPES,
)
from readmodels.graph.protocol import PlannedMigration


def _columns(types: dict[str, str], primary_key: str | None = None) -> str:
    columns = [f"{name} {kind}" for name, kind in types.items()]
    if primary_key is not None:
        columns.append(f"PRIMARY KEY({primary_key})")
    return ", ".join(columns)


def typed_rel_ddl(label: str) -> str:
    """DDL of a typed relationship table; `label` must come from `identity.typed_label`."""
    return f"CREATE REL TABLE IF NOT EXISTS `{label}`(FROM EntityKey TO EntityKey, {_columns(EDGE_TYPES)})"


_EDGE_TYPES_0003: Final = {
    **{name: kind for name, kind in EDGE_TYPES.items() if name != "content"},
    "carried_from": "STRING",
    "carried_by_event_seq": "INT64",
    "content": "STRING",
}
_PROJECTED_RELATION_TYPES_0003: Final = {
    ("target_uid" if name == "target_key" else name): kind for name, kind in PROJECTED_RELATION_TYPES.items()
}
"""The columns when `0003_relations` was written (edges then joined versions and were copied to each new
one): an applied migration's statements never change."""

_MIGRATION_TABLE = (
    "CREATE NODE TABLE IF NOT EXISTS Migration("
    "name STRING, checksum STRING, statements INT64, applied_at STRING, PRIMARY KEY(name))"
)

_MIGRATIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("0000_migration_table", (_MIGRATION_TABLE,)),
    (
        "0001_nodes",
        (
            "CREATE NODE TABLE IF NOT EXISTS Session(id STRING, first_seq INT64, first_ts STRING, "
            "last_seq INT64, last_ts STRING, last_hash STRING, event_count INT64, PRIMARY KEY(id))",
            f"CREATE NODE TABLE IF NOT EXISTS Event({_columns(EVENT_TYPES, 'uid')})",
            f"CREATE NODE TABLE IF NOT EXISTS Entity({_columns(ENTITY_TYPES, 'uid')})",
            "CREATE NODE TABLE IF NOT EXISTS EntityKey(key STRING, session STRING, name STRING, "
            "entity_type STRING, name_key STRING, latest_uid STRING, versions INT64, PRIMARY KEY(key))",
            "CREATE NODE TABLE IF NOT EXISTS Source(uid STRING, session STRING, path STRING, "
            "line_start INT64, line_end INT64, checksum STRING, text STRING, PRIMARY KEY(uid))",
            "CREATE NODE TABLE IF NOT EXISTS Checkpoint(id STRING, projector STRING, session STRING, "
            "seq INT64, event_hash STRING, PRIMARY KEY(id))",
        ),
    ),
    (
        "0002_spine_and_versions",
        (
            "CREATE REL TABLE IF NOT EXISTS HAS_EVENT(FROM Session TO Event)",
            "CREATE REL TABLE IF NOT EXISTS NEXT_EVENT(FROM Event TO Event)",
            "CREATE REL TABLE IF NOT EXISTS PREVIOUS_EVENT(FROM Event TO Event)",
            "CREATE REL TABLE IF NOT EXISTS SUPERSEDED_BY(FROM Entity TO Entity, at STRING)",
            "CREATE REL TABLE IF NOT EXISTS PREVIOUS_VERSION(FROM Entity TO Entity, at STRING)",
        ),
    ),
    (
        "0003_relations",
        (
            f"CREATE REL TABLE IF NOT EXISTS RELATES(FROM Entity TO Entity, {_columns(_EDGE_TYPES_0003)})",
            "CREATE REL TABLE IF NOT EXISTS PROJECTED_ENTITY(FROM Event TO Entity, action STRING)",
            "CREATE REL TABLE IF NOT EXISTS PROJECTED_RELATION(FROM Event TO Entity, "
            f"{_columns(_PROJECTED_RELATION_TYPES_0003)})",
        ),
    ),
    (
        "0004_sources_and_observations",
        (
            "CREATE REL TABLE IF NOT EXISTS CITES_SOURCE(FROM Event TO Source, FROM Entity TO Source, "
            f"{_columns(CITATION_TYPES)})",
            *(
                f"CREATE REL TABLE IF NOT EXISTS {table}(FROM Entity TO Event, {_columns(OBSERVATION_TYPES)})"
                for table in OBSERVATION_TABLES
            ),
        ),
    ),
    (
        EDGES_JOIN_ENTITIES,
        (  # applied to a graph without edges only (`missing` refuses an older graph: it must be rebuilt)
            "DROP TABLE IF EXISTS PROJECTED_RELATION",
            "DROP TABLE IF EXISTS RELATES",
            f"CREATE REL TABLE IF NOT EXISTS RELATES(FROM EntityKey TO EntityKey, {_columns(EDGE_TYPES)})",
            "CREATE REL TABLE IF NOT EXISTS PROJECTED_RELATION(FROM Event TO EntityKey, "
            f"{_columns(PROJECTED_RELATION_TYPES)})",
            "CREATE REL TABLE IF NOT EXISTS HAS_VERSION(FROM EntityKey TO Entity)",
        ),
    ),
)


def schema_plan() -> list[PlannedMigration]:
    """Every migration, in order, with its checksum. Pure: touches no database."""
    return plan_of(_MIGRATIONS)


def applied_migrations(execute: Execute) -> dict[str, str]:
    """name -> recorded checksum of the migrations applied to this database."""
    tables = {str(row["name"]) for row in execute("CALL show_tables() RETURN name", None)}
    if "Migration" not in tables:
        return {}
    rows = execute("MATCH (m:Migration) RETURN m.name AS name, m.checksum AS checksum", None)
    return {str(row["name"]): str(row["checksum"]) for row in rows}


def apply_migrations(
    execute: Execute, plan: list[PlannedMigration] | None = None, *, now: str | None = None
) -> list[str]:
    """Apply the missing migrations (each in its own transaction); return the names applied.

    Raises `MigrationChecksumError`, before applying anything, when an applied migration's recorded
    checksum differs from the plan's.
    """
    plan = schema_plan() if plan is None else plan
    todo = missing(plan, applied_migrations(execute))
    if any(m.name == EDGES_JOIN_ENTITIES for m in todo) and _holds_version_edges(execute):
        raise outdated_graph("this graph")
    applied: list[str] = []
    for migration in todo:
        execute("BEGIN TRANSACTION", None)
        try:
            for statement in migration.statements:
                execute(statement, None)
            execute(
                "CREATE (m:Migration {name: $name, checksum: $checksum, statements: $count, "
                "applied_at: $at})",
                {
                    "name": migration.name,
                    "checksum": migration.checksum,
                    "count": migration.statement_count,
                    "at": now or applied_at(),
                },
            )
            execute("COMMIT", None)
        except BaseException:
            with contextlib.suppress(RuntimeError):  # a failed statement may already have rolled back
                execute("ROLLBACK", None)
            raise
        applied.append(migration.name)
    return applied


def _holds_version_edges(execute: Execute) -> bool:
    """Whether `RELATES` still joins versions and holds edges (a graph built before `EDGES_JOIN_ENTITIES`)."""
    tables = {str(row["name"]) for row in execute("CALL show_tables() RETURN name", None)}
    if "RELATES" not in tables:
        return False
    return bool(execute("MATCH (:Entity)-[r:RELATES]->() RETURN r.uid AS uid LIMIT 1", None))
