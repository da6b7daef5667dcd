"""`eventloom verify`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from nats.aio.client import Client
from rich.markup import escape

from eventloom.bus.stream import StreamLayout
from eventloom.errors import EventValidationError
from eventloom.event import utc_timestamp
from eventloom.keys import Keyring, KeyStore, TrustedKey
from eventloom.settings import Settings
from eventloom.validation import decode_json_input
from gateway.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    fail,
    on_stream,
    out,
    print_json,
    run,
    settings_of,
)

if TYPE_CHECKING:  # the checks are imported when a command runs (`eventloom --help` stays fast)
    from eventloom.verify import VerifyReport


def register(app: typer.Typer) -> None:
    app.command(help="Check chain, hashes, signatures, seq continuity and ledger-vs-stream parity.")(verify)


def verify(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Only this session")] = None,
    ledger_only: Annotated[
        Path | None, typer.Option("--ledger-only", help="Verify this ledger directory alone; no node needed")
    ] = None,
    keyring: Annotated[
        Path | None, typer.Option(help="Keyring file of trusted public keys (default: the data dir's)")
    ] = None,
    wait: Annotated[float, typer.Option(help="Seconds to let the ledger mirror catch up first")] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as one JSON object")] = False,
) -> None:
    from eventloom.verify import VerifyReport, verify_ledger_dir  # noqa: PLC0415 (imported when run)

    settings = settings_of(ctx)
    trusted = load_keyring(settings, keyring)
    if ledger_only is not None:
        if not ledger_only.is_dir():
            fail(f"--ledger-only: {ledger_only} is not a directory", EXIT_INVALID)
        sessions = verify_ledger_dir(ledger_only, trusted, session)
        report = VerifyReport(
            ok=all(s.ok for s in sessions),
            checked_at=utc_timestamp(),
            ledger_dir=str(ledger_only),
            stream=None,
            sessions=sessions,
        )
    else:
        report = run(_verify(settings, trusted, session, wait))
    if as_json:
        print_json(report)
    else:
        _print(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def load_keyring(settings: Settings, path: Path | None) -> Keyring:
    if path is None:
        return KeyStore(settings.data_dir).load_keyring()
    try:
        exported = decode_json_input(path.read_bytes(), "keyring", dict[str, list[TrustedKey]])
    except OSError as exc:
        fail(f"--keyring: cannot read {path}: {exc.strerror}", EXIT_INVALID)
    except EventValidationError as exc:
        fail(f"--keyring: {path}: {exc}", EXIT_INVALID)
    return Keyring(exported.get("keys", []))


async def _verify(settings: Settings, keyring: Keyring, session: str | None, wait: float) -> VerifyReport:
    from eventloom.verify import verify_everything  # noqa: PLC0415

    async def verify(client: Client, layout: StreamLayout) -> VerifyReport:
        return await verify_everything(
            client, layout, keyring, settings.ledger_dir, session=session, wait_s=wait
        )

    return await on_stream(settings, "eventloom-verify", verify)


def _print(report: VerifyReport) -> None:
    for item in report.sessions:
        counts = f"ledger {item.ledger_events if item.ledger_events is not None else '-'}"
        if item.stream_events is not None:
            counts += f", stream {item.stream_events}"
        if item.ok:
            out.print(f"[green]ok[/]      {item.session}  ({counts} events)", highlight=False)
            continue
        out.print(f"[red]BROKEN[/]  {item.session}  ({counts} events)", highlight=False)
        for finding in item.findings:
            out.print(
                escape(f"        seq {finding.seq} [{finding.where}]: {finding.reason}"), highlight=False
            )
    broken = sum(1 for item in report.sessions if not item.ok)
    if report.ok:
        out.print(f"[green]verified[/]: {len(report.sessions)} session(s)", highlight=False)
    else:
        out.print(
            f"[red]verification failed[/]: {broken} of {len(report.sessions)} session(s) broken",
            highlight=False,
        )
