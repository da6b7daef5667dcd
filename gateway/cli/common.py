"""What every CLI command shares: settings from the global options, error reporting, JSON output."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import msgspec
import typer
from rich.console import Console

from eventloom.errors import EventloomError, EventValidationError, NodeNotRunningError, WrongExpectedSeqError
from eventloom.settings import Settings

T = TypeVar("T")
console = Console(stderr=True)
EXIT_INVALID = 2
EXIT_NO_NODE = 3
EXIT_FAILED = 1
EXIT_CONFLICT = 4  # --expected-seq did not hold: nothing was written


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
    except EventValidationError as exc:
        fail(f"invalid input: {exc}", EXIT_INVALID)
    except NodeNotRunningError as exc:
        fail(str(exc), EXIT_NO_NODE)
    except WrongExpectedSeqError as exc:
        fail(str(exc), EXIT_CONFLICT)
    except EventloomError as exc:
        fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    console.print(f"[bold red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def print_json(value: object) -> None:
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")
    sys.stdout.flush()
