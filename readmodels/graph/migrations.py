"""What every backend's migrations share: checksums, the plan, and refusing an edited migration.

A migration is named, idempotent and recorded (a `Migration` node: name, checksum, statement count,
applied time). It is never edited once applied: a changed checksum stops the store from opening, and the
fix is a new migration.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from readmodels.graph.protocol import GraphModelOutdatedError, MigrationChecksumError, PlannedMigration

EDGES_JOIN_ENTITIES = "0005_edges_join_entities"
"""The LadybugDB migration after which relations join entities (`EntityKey`), not versions."""


def outdated_graph(where: str) -> GraphModelOutdatedError:
    return GraphModelOutdatedError(
        f"{where} was built when relations joined entity versions (a copy of every relation of an entity "
        "for each of its versions); they now join entities. Rebuild it from the stream: "
        "`eventloom rebuild graph` (with `--backend neo4j` for Neo4j)"
    )


def checksum(statements: tuple[str, ...]) -> str:
    return "sha256:" + hashlib.sha256("\n".join(statements).encode("utf-8")).hexdigest()


def plan_of(migrations: Iterable[tuple[str, tuple[str, ...]]]) -> list[PlannedMigration]:
    return [
        PlannedMigration(name=name, checksum=checksum(statements), statements=statements)
        for name, statements in migrations
    ]


def missing(plan: list[PlannedMigration], recorded: Mapping[str, str]) -> list[PlannedMigration]:
    """The migrations of `plan` not yet applied, after refusing any applied one whose checksum changed."""
    for migration in plan:
        known = recorded.get(migration.name)
        if known is not None and known != migration.checksum:
            raise MigrationChecksumError(
                f"migration {migration.name} was applied with checksum {known}, but the code now has "
                f"{migration.checksum}; never edit an applied migration, add a new one"
            )
    return [migration for migration in plan if migration.name not in recorded]


def applied_at() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
