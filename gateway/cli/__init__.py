"""The `eventloom` command line.

A plug-in package adds commands through the entry point group `eventloom.cli`: the object named is a
`register(app: typer.Typer) -> None` called with the root app, after the built-in commands. A plug-in
that fails to load or register is left out with a warning on stderr; the rest of the CLI still works.
"""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperOption

from gateway.cli import (
    causal_cmds,
    consolidation_cmds,
    consumer_cmd,
    demo,
    dev_cmds,
    graph_cmds,
    health_cmd,
    keys_cmd,
    log_cmds,
    mcp_cmds,
    memory_cmds,
    nats_cmds,
    node_cmds,
    quarantine_cmd,
    rebuild_cmd,
    repair_cmd,
    schema_cmds,
    types_cmd,
    verify_cmd,
    worker_cmds,
)
from gateway.cli.common import make_settings

DATA_DIR_OPTION = "--data-dir"
CLI_GROUP = "eventloom.cli"


def _flags_show_no_type() -> None:
    """Typer's help shows a flag as `--json <bool>`, as if it took a value; a flag takes none."""
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:  # typer's own vendored click
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_flags_show_no_type()

app = typer.Typer(
    name="eventloom",
    help="Event-sourced memory for AI agents: signed, hash-chained events on NATS JetStream.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    data_dir: Annotated[
        Path | None,
        typer.Option(DATA_DIR_OPTION, help="Data directory (env: EVENTLOOM_DATA_DIR; default: ./.eventloom)"),
    ] = None,
) -> None:
    ctx.obj = make_settings(data_dir)


node_cmds.register(app)
log_cmds.register(app)
verify_cmd.register(app)
repair_cmd.register(app)
quarantine_cmd.register(app)
nats_cmds.register(app)
demo.register(app)
worker_cmds.register(app)
graph_cmds.register(app)
rebuild_cmd.register(app)
dev_cmds.register(app)
memory_cmds.register(app)
consolidation_cmds.register(memory_cmds.memory_app)
causal_cmds.register(memory_cmds.causal_app)
schema_cmds.register(app)
types_cmd.register(app)
mcp_cmds.register(app)
health_cmd.register(app)
consumer_cmd.register(app)
app.add_typer(keys_cmd.app, name="keys")


def register_plugins(root: typer.Typer) -> None:
    """Call the `register(app)` of every installed `eventloom.cli` entry point; warn about one that fails."""
    for entry in sorted(entry_points(group=CLI_GROUP), key=lambda e: e.name):
        try:
            entry.load()(root)
        except Exception as exc:  # a broken plug-in must not take the whole CLI down
            sys.stderr.write(
                f"warning: the CLI plug-in {entry.name!r} ({entry.value}) was left out: "
                f"{type(exc).__name__}: {exc}\n"
            )


register_plugins(app)


def main() -> None:
    app(args=global_options_first(sys.argv[1:]))


def global_options_first(args: list[str]) -> list[str]:
    """`--data-dir` is accepted anywhere (`eventloom status --data-dir x`), not only before the command:
    it is moved to the front. Only before a `--`, after which everything is an argument."""
    moved: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(args):
        arg = args[index]
        if arg == "--":
            rest += args[index:]
            break
        if arg == DATA_DIR_OPTION and index + 1 < len(args):
            moved += args[index : index + 2]
            index += 2
            continue
        if arg.startswith(DATA_DIR_OPTION + "="):
            moved.append(arg)
        else:
            rest.append(arg)
        index += 1
    return moved + rest
