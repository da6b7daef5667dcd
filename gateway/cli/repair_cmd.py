"""`eventloom repair`: re-publish from the verified ledger the events the stream lost."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from nats.aio.client import Client
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import StreamLayout, describe_stream, ensure_stream, jetstream_api
from eventloom.keys import Keyring
from eventloom.runtime import resolve_nats_url
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, console, out, print_json, run, settings_of
from gateway.cli.verify_cmd import load_keyring

if TYPE_CHECKING:  # the repair is imported when the command runs (`eventloom --help` stays fast)
    from eventloom.repair import RepairReport, SessionRepair

_STREAM_NOT_FOUND = 10059
HELP = (
    "Re-publish from the ledger the events the stream lost, so that both agree again.\n\n"
    "Verifies the ledger (hashes, signatures, chains, signed manifest), compares it with the stream session "
    "by session, and reports what the stream lacks. With --apply, re-publishes those events in seq order "
    "with their original bytes and signatures (never re-signed), each guarded by the subject's last "
    "sequence, so a session that moved on meanwhile is never forked. If the stream itself is gone, --apply "
    "creates it empty and re-publishes everything.\n\n"
    "Refuses a session, and says why, when its ledger does not verify, when ledger and stream hold different "
    "events at one seq, or when the lost events are not all after the stream's last one.\n\n"
    "Exit 0 when ledger and stream agree (with --apply: once repaired), 1 when something is left to repair "
    "or was refused."
)


def register(app: typer.Typer) -> None:
    app.command(help=HELP, short_help="Re-publish from the ledger the events the stream lost.")(repair)


def repair(
    ctx: typer.Context,
    apply: Annotated[bool, typer.Option("--apply", help="Re-publish (default: only report)")] = False,
    session: Annotated[str | None, typer.Option(help="Only this session")] = None,
    keyring: Annotated[
        Path | None, typer.Option(help="Keyring file of trusted public keys (default: the data dir's)")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object")] = False,
) -> None:
    settings = settings_of(ctx)
    trusted = load_keyring(settings, keyring)
    report = run(_repair(settings, trusted, session, apply, show_progress=not as_json))
    if as_json:
        print_json(report)
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


async def _repair(
    settings: Settings, keyring: Keyring, session: str | None, apply: bool, *, show_progress: bool
) -> RepairReport:
    from eventloom.repair import apply_repair, plan_repair  # noqa: PLC0415 (imported when the command runs)

    client = await connect(
        resolve_nats_url(settings),
        name="eventloom-repair",
        persistent=False,
        credentials=credentials_of(settings),
    )
    try:
        layout = await _layout(client, settings, create=apply)
        plan = await plan_repair(client, layout, keyring, settings.ledger_dir, session)
        total = sum(item.to_publish for item in plan.sessions)
        if not apply or total == 0:
            return await _applied_if(apply, client, layout, settings, plan)
        with _progress(show_progress) as progress:
            task = progress.add_task("re-publishing", total=total)
            return await apply_repair(
                client, layout, settings.ledger_dir, plan, lambda n: progress.advance(task, n)
            )
    finally:
        await asyncio.shield(client.close())


async def _applied_if(
    apply: bool, client: Client, layout: StreamLayout, settings: Settings, plan: RepairReport
) -> RepairReport:
    from eventloom.repair import apply_repair  # noqa: PLC0415

    return await apply_repair(client, layout, settings.ledger_dir, plan) if apply else plan


async def _layout(client: Client, settings: Settings, *, create: bool) -> StreamLayout:
    """The stream's layout; a stream that is gone is created (with --apply) or read as empty (report)."""
    info = await jetstream_api(client, f"STREAM.INFO.{settings.stream}")
    missing = info.get("error", {}).get("err_code") == _STREAM_NOT_FOUND
    if not missing:
        return await describe_stream(client, settings.stream)  # repair never changes the stream's config
    if not create:
        return StreamLayout(name=settings.stream, partitions=settings.partitions)
    return await ensure_stream(client, settings)


def _progress(visible: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not visible,
    )


def _print(outcome: RepairReport) -> None:
    for item in outcome.sessions:
        _print_session(item)
    counts = {status: sum(1 for s in outcome.sessions if s.status == status) for status in _COLOURS}
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    verdict = "[green]ledger and stream agree[/]" if outcome.ok else "[red]not repaired[/]"
    if not outcome.ok and not outcome.applied and not counts["refused"]:
        verdict = "[yellow]repairable[/]: run `eventloom repair --apply`"
    out.print(f"{verdict} ({summary or 'no sessions'})", highlight=False)


_COLOURS = {"ok": "green", "repairable": "yellow", "repaired": "green", "refused": "red"}


def _print_session(item: SessionRepair) -> None:
    colour = _COLOURS[item.status]
    counts = f"ledger to seq {item.ledger_seq}, stream to seq {item.stream_seq}"
    out.print(f"[{colour}]{item.status:<10}[/] {escape(item.session)}  ({counts})", highlight=False)
    if item.missing_from is not None and item.status in ("repairable", "repaired"):
        done = f", {item.republished} re-published" if item.status == "repaired" else ""
        out.print(
            f"           stream lacks seq {item.missing_from}..{item.missing_to}{done}", highlight=False
        )
    if item.reason:
        out.print(escape(f"           {item.reason}"), highlight=False)
    if item.advice:
        out.print(escape(f"           what to do: {item.advice}"), highlight=False)
