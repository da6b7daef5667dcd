"""`eventloom quarantine list|clear`: messages on event subjects that are not events of the chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from nats.aio.client import Client

from eventloom.bus.stream import StreamLayout
from eventloom.event import os_principal
from eventloom.keys import Keyring
from eventloom.quarantine import Quarantined, clear_quarantined, cleared_digests
from eventloom.settings import Settings
from gateway.cli.common import EXIT_INVALID, console, fail, on_stream, out, print_json, run, settings_of
from gateway.cli.verify_cmd import load_keyring

quarantine_app = typer.Typer(
    help="Messages on a session's subject that are not its events (not valid, or signed by an untrusted "
    "key): every consumer steps over them; list them, then clear them once reviewed.",
    no_args_is_help=True,
)
SessionOption = Annotated[str | None, typer.Option(help="Only this session")]
KeyringOption = Annotated[
    Path | None, typer.Option(help="Keyring file of trusted public keys (default: the data dir's)")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON")]


def register(app: typer.Typer) -> None:
    app.add_typer(quarantine_app, name="quarantine")


@quarantine_app.command("list", help="Quarantined messages not cleared yet: stream seq, session, why.")
def quarantine_list(
    ctx: typer.Context,
    session: SessionOption = None,
    keyring: KeyringOption = None,
    show_all: Annotated[bool, typer.Option("--all", help="Cleared ones too")] = False,
    as_json: JsonOption = False,
) -> None:
    settings = settings_of(ctx)
    found = run(_find(settings, load_keyring(settings, keyring), session, show_all))
    if as_json:
        print_json(found)
        return
    _print(found)
    out.print(f"{len(found)} quarantined message(s)")


@quarantine_app.command(
    "clear",
    help="Record quarantined messages as reviewed (the stream denies deletes: they stay, but `verify` "
    "passes, their dead letters go, and appends may step over them). If one is a peer node's event, trust "
    "its key instead (`eventloom keys trust`).",
)
def quarantine_clear(
    ctx: typer.Context,
    session: SessionOption = None,
    stream_seq: Annotated[
        list[int] | None, typer.Option("--stream-seq", help="Only these (repeatable; as `list` shows them)")
    ] = None,
    keyring: KeyringOption = None,
    as_json: JsonOption = False,
) -> None:
    settings = settings_of(ctx)
    found = run(_find(settings, load_keyring(settings, keyring), session, False))
    if stream_seq:
        unknown = sorted(set(stream_seq) - {q.stream_seq for q in found})
        if unknown:
            fail(f"stream_seq: {unknown} not quarantined (see `eventloom quarantine list`)", EXIT_INVALID)
        found = [q for q in found if q.stream_seq in set(stream_seq)]
    cleared = run(_clear(settings, found))
    if as_json:
        print_json({"cleared": cleared, "messages": found})
        return
    _print(found)
    console.print(f"cleared {cleared} quarantined message(s)")


def _print(found: list[Quarantined]) -> None:
    for q in found:
        print(f"stream seq {q.stream_seq}  {q.session} (at seq {q.seq}): {q.reason}")


async def _find(
    settings: Settings, keyring: Keyring, session: str | None, show_all: bool
) -> list[Quarantined]:
    from eventloom.verify import find_quarantined  # noqa: PLC0415 (imported when the command runs)

    async def find(client: Client, layout: StreamLayout) -> list[Quarantined]:
        found = await find_quarantined(client, layout, keyring, session)
        cleared = set() if show_all else await cleared_digests(client)
        return [q for q in found if q.digest not in cleared]

    return await on_stream(settings, "eventloom-quarantine", find)


async def _clear(settings: Settings, found: list[Quarantined]) -> int:
    if not found:
        return 0

    async def clear(client: Client, layout: StreamLayout) -> int:
        return await clear_quarantined(client, layout, found, os_principal())

    return await on_stream(settings, "eventloom-quarantine", clear)
