"""What every CLI command shares: settings from the global options, error reporting, JSON output."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import msgspec
import typer
from nats.aio.client import Client
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Column, Table

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import StreamLayout, describe_stream
from eventloom.errors import (
    EventloomError,
    EventValidationError,
    IdempotencyConflictError,
    NodeNotRunningError,
    WrongExpectedSeqError,
)
from eventloom.runtime import RoleState, resolve_nats_url
from eventloom.settings import Settings

T = TypeVar("T")
PIPED_WIDTH = 120
"""Panels and prose laid out for a pipe or a file are this wide (or $COLUMNS); plain lines are never cut,
and a report's table is as wide as its rows (`print_table`)."""
_WIDEST_TABLE = 1000


def _console(*, stderr: bool) -> Console:
    on_terminal = Console(stderr=stderr)
    if on_terminal.is_terminal:
        return Console(stderr=stderr, soft_wrap=True)
    return Console(stderr=stderr, soft_wrap=True, width=piped_width())


def piped_width() -> int:
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH


console = _console(stderr=True)
"""Errors, warnings, progress and what a command did: stderr."""
out = _console(stderr=False)
"""The readable answer of a command that reports (status, verify, health, the lists): stdout."""
EXIT_INVALID = 2
EXIT_NO_NODE = 3
EXIT_FAILED = 1
EXIT_CONFLICT = (
    4  # --expected-seq did not hold, or an idempotency key came with another request: nothing written
)


def settings_of(ctx: typer.Context) -> Settings:
    settings = ctx.find_root().obj
    assert isinstance(settings, Settings)
    return settings


def make_settings(data_dir: Path | None) -> Settings:
    try:
        return Settings.from_env(data_dir=data_dir)
    except ValueError as exc:
        fail(str(exc), EXIT_INVALID)


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; known errors become a one-line message and an exit code."""
    try:
        return asyncio.run(coroutine)
    except EventloomError as exc:
        fail(message_of(exc), exit_code_of(exc))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def exit_code_of(exc: EventloomError) -> int:
    """The exit code a known error ends a command with."""
    if isinstance(exc, EventValidationError):
        return EXIT_INVALID
    if isinstance(exc, NodeNotRunningError):
        return EXIT_NO_NODE
    if isinstance(exc, WrongExpectedSeqError | IdempotencyConflictError):
        return EXIT_CONFLICT
    return EXIT_FAILED


def message_of(exc: EventloomError) -> str:
    """A known error's one-line message."""
    return f"invalid input: {exc}" if isinstance(exc, EventValidationError) else str(exc)


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def print_json(value: object) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")
    sys.stdout.flush()


def report_table(*headers: str) -> Table:
    """A table for a report: a cell too wide for the line folds onto the next, never cut with an ellipsis."""
    return Table(*(Column(header, overflow="fold") for header in headers))


def print_table(table: Table) -> None:
    """A report's table on stdout. On a terminal it fits the window; piped, each row stays on one line (a
    script or grep reads it whole), however wide that makes the table."""
    if out.is_terminal:
        out.print(table)
        return
    piped = out.width
    natural = Measurement.get(out, out.options.update(max_width=_WIDEST_TABLE), table).maximum
    out.width = max(piped, natural)
    try:
        out.print(table)
    finally:
        out.width = piped


def print_failing(failing: Mapping[str, RoleState]) -> None:
    """A red line per failing role in a report: its restarts, when it tries again, its last error."""
    for name, state in failing.items():
        when = f", next try in {state.retry_in_s:g}s" if state.retry_in_s is not None else ""
        line = f"({state.restarts} restart(s){when}): {state.last_error}"
        out.print(f"[red]role {escape(name)} failing[/] {escape(line)}", highlight=False)


async def on_stream(settings: Settings, name: str, work: Callable[[Client, StreamLayout], Awaitable[T]]) -> T:
    """`work` on a one-shot connection to the node's existing stream (nothing is created or changed)."""
    client = await connect(
        resolve_nats_url(settings), name=name, persistent=False, credentials=credentials_of(settings)
    )
    try:
        return await work(client, await describe_stream(client, settings.stream))
    finally:
        await asyncio.shield(client.close())
