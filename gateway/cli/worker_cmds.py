"""`eventloom projector ...`, `eventloom producer ...` and `eventloom dlq ...`."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, TypeVar

import msgspec
import typer

from eventloom.dlq import list_dead_letters, request_retry
from eventloom.runtime import RoleState, RuntimeInfo, read_runtime
from eventloom.settings import Settings
from gateway.cli.common import (
    EXIT_INVALID,
    console,
    fail,
    out,
    print_failing,
    print_json,
    print_table,
    report_table,
    run,
    settings_of,
)
from projectors.partitions import parse_partitions
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available

if TYPE_CHECKING:  # the log, the workers and the node are imported when a command runs (`--help` stays fast)
    from eventloom.log import EventLog
    from projectors.runner import ProjectorRunner
    from projectors.status import ConsumerStatus

T = TypeVar("T")

projector_app = typer.Typer(help="Projectors: consumers that build read models.", no_args_is_help=True)
producer_app = typer.Typer(help="Producers: consumers that derive new events.", no_args_is_help=True)
dlq_app = typer.Typer(help="The dead-letter stream: events a consumer gave up on.", no_args_is_help=True)

PartitionsOption = Annotated[
    str | None, typer.Option("--partitions", help="Only these partitions, e.g. 0-7 or 0-3,9 (default: all)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def register(app: typer.Typer) -> None:
    app.add_typer(projector_app, name="projector")
    app.add_typer(producer_app, name="producer")
    app.add_typer(dlq_app, name="dlq")


@projector_app.command("run", help="Run one projector until Ctrl-C (finishes the batch in hand first).")
def projector_run(ctx: typer.Context, name: str, partitions: PartitionsOption = None) -> None:
    from gateway.workers import projector_runner  # noqa: PLC0415

    settings = settings_of(ctx)
    make = lambda log: projector_runner(log, name, _partitions(partitions, log), sole_worker=True)  # noqa: E731
    run(_run_worker(settings, make, "projector", [f"projector:{name}"]))


@producer_app.command("run", help="Run producers (one name, or several sharing one consumer) until Ctrl-C.")
def producer_run(ctx: typer.Context, names: list[str], partitions: PartitionsOption = None) -> None:
    from gateway.workers import producer_runner  # noqa: PLC0415

    settings = settings_of(ctx)
    make = lambda log: producer_runner(log, names, _partitions(partitions, log), sole_worker=True)  # noqa: E731
    run(_run_worker(settings, make, "producer", [f"producer:{name}" for name in sorted(names)]))


@projector_app.command("list", help="Installed projectors; * marks those the running node runs.")
def projector_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    from gateway.workers import enabled_projectors  # noqa: PLC0415

    _list(settings_of(ctx), PROJECTORS_GROUP, enabled_projectors, _projectors_of, as_json)


@producer_app.command("list", help="Installed producers; * marks those the running node runs.")
def producer_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    from gateway.workers import enabled_producers  # noqa: PLC0415

    _list(settings_of(ctx), PRODUCERS_GROUP, enabled_producers, _producers_of, as_json)


@projector_app.command("status", help="Lag, rate and dead letters of every projector and producer consumer.")
def projector_status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    settings = settings_of(ctx)
    statuses, failing = _with_role_states(run(_statuses(settings)), read_runtime(settings.runtime_file))
    if as_json:
        print_json(statuses)
        return
    columns = ["consumer", "state", "lag", "lag s", "rate/s", "applied", "dead letters", "refused"]
    table = report_table(*columns, "updated", "holder")
    for s in statuses:
        rate = "-" if s.rate_per_s is None else f"{s.rate_per_s:.1f}"
        table.add_row(
            s.consumer,
            "[red]failing[/]" if s.state == "failing" else s.state or "-",
            str(s.lag),
            "-" if s.lag_s is None else f"{s.lag_s:.1f}",
            rate,
            str(s.applied or "-"),
            str(s.dead_letters),
            str(s.refused or "-"),
            s.updated_at or "-",
            s.holder or "-",
        )
    print_table(table)
    print_failing(failing)


def _with_role_states(
    statuses: list[ConsumerStatus], node: RuntimeInfo | None
) -> tuple[list[ConsumerStatus], dict[str, RoleState]]:
    """Each consumer with the state of the node role reading through it; and the node's failing roles."""
    from gateway.node import role_of_consumer  # noqa: PLC0415

    if node is None:
        return statuses, {}
    joined = []
    for status in statuses:
        role = role_of_consumer(status.consumer, node)
        state = node.role_states.get(role) if role else None
        if state is not None:
            status = msgspec.structs.replace(status, state=state.state, last_error=state.last_error)  # noqa: PLW2901
        joined.append(status)
    return joined, node.failing()


@dlq_app.command("list", help="Dead letters, optionally of one consumer.")
def dlq_list(
    ctx: typer.Context,
    consumer: Annotated[str | None, typer.Option(help="Only this consumer")] = None,
    as_json: JsonOption = False,
) -> None:
    letters = run(_with_log(settings_of(ctx), lambda log: list_dead_letters(log.client, consumer)))
    if as_json:
        print_json(letters)
        return
    for letter in letters:
        where = f"{letter.session}#{letter.seq}" if letter.session else letter.subject
        print(
            f"{letter.consumer}  stream seq {letter.stream_seq}  {where}  "
            f"attempts {letter.attempts}: {letter.error}"
        )
    out.print(f"{len(letters)} dead letter(s)")


@dlq_app.command("retry", help="Queue dead letters for another try; the consumer's worker applies them.")
def dlq_retry(
    ctx: typer.Context,
    consumer: Annotated[str, typer.Option(help="The consumer whose dead letters to retry")],
    stream_seq: Annotated[
        list[int] | None, typer.Option("--stream-seq", help="Only these (repeatable)")
    ] = None,
) -> None:
    if consumer == "ledger-mirror":
        fail(
            "ledger-mirror dead letters are not retried: trust the signing key (`eventloom keys trust`) "
            "and restart the node; the mirror refetches the gap",
            EXIT_INVALID,
        )
    count = run(_with_log(settings_of(ctx), lambda log: request_retry(log.client, consumer, stream_seq)))
    console.print(f"queued {count} dead letter(s) of {consumer}; its worker retries them within seconds")


def _set_lease_role(capabilities: list[str], consumer: str, role: str) -> None:
    """`lease:<consumer>:active` or `:standby` among a worker's heartbeat capabilities."""
    capabilities[:] = [c for c in capabilities if not c.startswith(f"lease:{consumer}:")]
    capabilities.append(f"lease:{consumer}:{role}")


def _partitions(spec: str | None, log: EventLog) -> list[int] | None:
    """Validated against the stream's own partition count (fixed when it was created)."""
    try:
        return parse_partitions(spec, log.layout.partitions)
    except ValueError as exc:
        fail(str(exc), EXIT_INVALID)


def _list(
    settings: Settings,
    group: str,
    enabled: Callable[[Settings], list[str]],
    running_on: Callable[[RuntimeInfo], list[str]],
    as_json: bool,
) -> None:
    """Installed plug-ins, starred when the node running on this data dir runs them (with no node: when
    `eventloom up` in this environment would)."""
    installed = available(group)
    node = read_runtime(settings.runtime_file)
    try:
        enabled_here = set(enabled(settings))
    except ValueError as exc:
        fail(str(exc), EXIT_INVALID)
    running = set(running_on(node)) if node is not None else None
    rows = [
        {
            "name": name,
            "entry_point": entry.value,
            "enabled": name in enabled_here,  # what `eventloom up` in this environment would run
            "running": None if running is None else name in running,  # what the running node runs
        }
        for name, entry in sorted(installed.items())
    ]
    if as_json:
        print_json(rows)
        return
    starred = "running" if node is not None else "enabled"
    for row in rows:
        print(f"{'*' if row[starred] else ' '} {row['name']:<24} {row['entry_point']}")
    if node is not None:
        out.print(f"* = run by the node on {settings.data_dir} (pid {node.pid})")
    else:
        out.print(f"* = what `eventloom up` would run here (no node is running on {settings.data_dir})")


def _projectors_of(node: RuntimeInfo) -> list[str]:
    return [role.removeprefix("projector:") for role in node.roles if role.startswith("projector:")]


def _producers_of(node: RuntimeInfo) -> list[str]:
    return node.producers


async def _with_log(settings: Settings, use: Callable[[EventLog], Awaitable[T]]) -> T:
    from eventloom.log import EventLog  # noqa: PLC0415

    async with await EventLog.open(settings, persistent=False) as log:
        return await use(log)


async def _statuses(settings: Settings) -> list[ConsumerStatus]:
    from projectors.status import consumer_statuses  # noqa: PLC0415

    return await _with_log(settings, lambda log: consumer_statuses(log.client, log.layout))


async def _run_worker(
    settings: Settings, make: Callable[[EventLog], ProjectorRunner], role: str, capabilities: list[str]
) -> None:
    from eventloom.log import EventLog  # noqa: PLC0415
    from gateway.heartbeats import consumers_heartbeat  # noqa: PLC0415

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with await EventLog.open(settings) as log:
        runner = make(log)
        console.print(f"running {runner.consumer} (Ctrl-C to stop)")
        heartbeat = consumers_heartbeat(
            log.client, settings, role=role, capabilities=capabilities, consumers=[runner.consumer]
        )
        if runner.lease is not None:  # peers see which worker applies and which stands by
            runner.lease.on_role = lambda role: _set_lease_role(heartbeat.capabilities, runner.consumer, role)
        async with heartbeat.running():
            await runner.run(stop)
        console.print(f"stopped {runner.consumer}: {runner.stats.summary()}", highlight=False)
