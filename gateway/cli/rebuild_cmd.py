"""`eventloom rebuild`: replay the log into a fresh read model, with a progress bar and a final report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from eventloom.settings import Settings
from gateway.cli.common import EXIT_INVALID, console, fail, print_json, run, settings_of
from gateway.cli.schema_cmds import Backend, BackendOption, backend_of
from gateway.cli.verify_cmd import load_keyring
from projectors.plugins import PROJECTORS_GROUP, available
from readmodels.graph.protocol import GraphStoreError

if TYPE_CHECKING:  # the rebuilds (and the backends) are imported when the command runs
    from projectors.graph.rebuild_neo4j import Neo4jRebuildReport, PhasedProgress
    from projectors.rebuild import RebuildReport

T = TypeVar("T")
ProgressFn = Callable[[int, int], None]


def register(app: typer.Typer) -> None:
    app.command(
        "rebuild",
        help="Rebuild a read model from the log. Embedded: from stream seq 1 into a new generation, swapped "
        "in atomically. Neo4j: in place, so stop the projector that writes the model first; the graph is "
        "emptied and bulk-loaded from the stream or a verified ledger directory, the keyword and vector "
        "models are cleared and replayed from stream seq 1.",
    )(rebuild_command)


def rebuild_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The projector, e.g. graph")],
    backend: BackendOption = None,
    from_ledger: Annotated[
        Path | None,
        typer.Option("--from-ledger", help="Neo4j: load this JSONL ledger directory (verified first)"),
    ] = None,
    keyring: Annotated[
        Path | None,
        typer.Option(help="Keyring of trusted public keys for --from-ledger (default: the data dir's)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
) -> None:
    settings = settings_of(ctx)
    installed = available(PROJECTORS_GROUP)
    if name not in installed:
        fail(f"no projector named {name!r}: installed are {', '.join(sorted(installed))}", EXIT_INVALID)
    chosen = backend_of(settings, backend)
    if chosen is Backend.neo4j and not settings.neo4j_uri:
        fail("neo4j_uri: not set (NEO4J_URI; `eventloom dev neo4j` starts a local server)", EXIT_INVALID)
    if chosen is Backend.neo4j and name == "graph":
        neo4j_report = _guarded(_rebuild_neo4j(settings, from_ledger, keyring, show_progress=not as_json))
        if as_json:
            print_json(neo4j_report)
            return
        done = neo4j_report
        console.print(
            f"rebuilt the graph on Neo4j {done.uri} from {done.source}: {done.events} events in "
            f"{done.seconds:.2f}s ({done.events_per_s:,.0f} events/s)"
        )
        return
    if from_ledger is not None:
        fail("--from-ledger loads the graph on Neo4j; other rebuilds replay the stream", EXIT_INVALID)
    settings = dataclasses.replace(settings, graph_backend=chosen.value)  # where the model's projector writes
    report = _guarded(_rebuild(settings, name, show_progress=not as_json))
    if as_json:
        print_json(report)
    elif report.in_place:
        console.print(
            f"rebuilt {report.projector} in place on Neo4j: {report.events} events in "
            f"{report.seconds:.2f}s ({report.events_per_s:,.0f} events/s)"
        )
    else:
        console.print(
            f"rebuilt {report.projector} into generation {report.generation}: {report.events} events in "
            f"{report.seconds:.2f}s ({report.events_per_s:,.0f} events/s); live from stream seq "
            f"{report.resume_stream_seq}"
        )


def _guarded(coroutine: Coroutine[Any, Any, T]) -> T:
    try:
        return run(coroutine)
    except GraphStoreError as exc:
        fail(str(exc))


async def _with_progress(
    label: str, show: bool, work: Callable[[ProgressFn | None], Coroutine[Any, Any, T]]
) -> T:
    if not show:
        return await work(None)
    with Progress(
        TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=console
    ) as bar:
        task = bar.add_task(label, total=None)
        return await work(lambda done, total: bar.update(task, completed=done, total=total))


async def _with_phases(show: bool, work: Callable[[PhasedProgress | None], Coroutine[Any, Any, T]]) -> T:
    """A bar per phase of a Neo4j rebuild: replaying the log (events), then loading Neo4j (rows)."""
    if not show:
        return await work(None)
    labels = {"replay": "replaying the log", "load": "loading into Neo4j (rows)"}
    with Progress(
        TextColumn("{task.description:<26}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=console,
    ) as bar:  # fmt: skip
        tasks: dict[str, TaskID] = {}

        def update(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(labels.get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done, total=total)

        return await work(update)


async def _rebuild(settings: Settings, name: str, *, show_progress: bool) -> RebuildReport:
    from eventloom.log import EventLog  # noqa: PLC0415
    from projectors.rebuild import rebuild  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        return await _with_progress(
            f"rebuilding {name}", show_progress, lambda progress: rebuild(log, name, progress=progress)
        )


async def _rebuild_neo4j(
    settings: Settings, ledger: Path | None, keyring: Path | None, *, show_progress: bool
) -> Neo4jRebuildReport:
    from eventloom.log import EventLog  # noqa: PLC0415
    from projectors.graph.rebuild_neo4j import (  # noqa: PLC0415
        rebuild_neo4j_from_ledger,
        rebuild_neo4j_from_stream,
    )

    if ledger is not None:
        trusted = load_keyring(settings, keyring)
        return await _with_phases(
            show_progress,
            lambda progress: rebuild_neo4j_from_ledger(settings, ledger, trusted, progress=progress),
        )
    async with await EventLog.open(settings, persistent=False) as log:
        return await _with_phases(
            show_progress, lambda progress: rebuild_neo4j_from_stream(log, progress=progress)
        )
