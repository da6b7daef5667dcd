"""`eventloom schema-plan` and `eventloom schema-apply`: the graph schema's named migrations."""

from __future__ import annotations

import asyncio
from enum import StrEnum
from typing import Annotated

import typer

from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, print_json, run, settings_of
from projectors.generations import Generations
from readmodels.graph.protocol import GraphStoreError, PlannedMigration

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


class Backend(StrEnum):
    ladybug = "ladybug"
    neo4j = "neo4j"


BackendOption = Annotated[
    Backend | None,
    typer.Option("--backend", help="Graph backend (default: EVENTLOOM_GRAPH_BACKEND, else ladybug)"),
]


def backend_of(settings: Settings, backend: Backend | None) -> Backend:
    return backend if backend is not None else Backend(settings.graph_backend)


def register(app: typer.Typer) -> None:
    app.command(
        "schema-plan",
        help="Print the graph schema migrations (names, checksums, statements); connects to nothing.",
    )(schema_plan_command)
    app.command(
        "schema-apply",
        help="Apply the missing graph schema migrations; refuses one whose checksum changed.",
    )(schema_apply_command)


def plan_for(settings: Settings, backend: Backend) -> list[PlannedMigration]:
    if backend is Backend.neo4j:
        from readmodels.neo4j import schema as neo4j_schema  # noqa: PLC0415 (backends: imported when used)
        from readmodels.vector.embedders import vector_width  # noqa: PLC0415

        return neo4j_schema.schema_plan(vector_width(settings))
    from readmodels.embedded import graph_schema as ladybug_schema  # noqa: PLC0415

    return ladybug_schema.schema_plan()


def schema_plan_command(
    ctx: typer.Context, backend: BackendOption = None, as_json: JsonOption = False
) -> None:
    settings = settings_of(ctx)
    chosen = backend_of(settings, backend)
    plan = plan_for(settings, chosen)
    if as_json:
        print_json(
            {
                "backend": chosen.value,
                "migrations": [
                    {"name": m.name, "checksum": m.checksum, "statements": list(m.statements)} for m in plan
                ],
            }
        )
        return
    print(f"-- graph schema for {chosen.value}: {len(plan)} migrations")
    for migration in plan:
        print(f"-- {migration.name}  ({migration.statement_count} statements, {migration.checksum})")
        for statement in migration.statements:
            print(f"{statement};")


def schema_apply_command(
    ctx: typer.Context, backend: BackendOption = None, as_json: JsonOption = False
) -> None:
    settings = settings_of(ctx)
    chosen = backend_of(settings, backend)
    running = read_runtime(settings.runtime_file)
    if chosen is Backend.ladybug and running is not None:
        fail(
            f"the node on {settings.data_dir} (pid {running.pid}) holds the embedded graph open, and applies "
            "missing migrations itself when it opens it: stop it first (`eventloom down`)",
            EXIT_INVALID,
        )
    try:
        applied = run(_apply(settings, chosen))
    except GraphStoreError as exc:
        fail(str(exc), EXIT_FAILED)
    if as_json:
        print_json({"backend": chosen.value, "applied": applied})
    elif applied:
        console.print(f"applied {len(applied)} migration(s) on {chosen.value}: {', '.join(applied)}")
    else:
        console.print(f"the {chosen.value} graph schema is up to date")


async def _apply(settings: Settings, backend: Backend) -> list[str]:
    if backend is Backend.neo4j:
        from readmodels.backends import neo4j_store  # noqa: PLC0415 (backends: imported when used)

        async with neo4j_store(settings) as store:
            return store.migrations_applied
    from projectors.backends import GRAPH_DATABASE  # noqa: PLC0415
    from readmodels.embedded.graph_store import LadybugGraphStore  # noqa: PLC0415

    path = await asyncio.to_thread(lambda: Generations(settings.data_dir / "readmodels" / "graph").current())
    async with LadybugGraphStore(path / GRAPH_DATABASE) as ladybug_store:
        return ladybug_store.migrations_applied
