"""`eventloom append` and `eventloom tail`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, NoReturn

import msgspec
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from eventloom.errors import EventloomError, EventValidationError
from eventloom.event import encode_event, os_principal
from eventloom.position import Appended
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from eventloom.validation import decode_json_input
from gateway.cli.common import (
    EXIT_INVALID,
    console,
    exit_code_of,
    fail,
    message_of,
    print_json,
    run,
    settings_of,
)

_IMPORT_CHUNK = 1000


class _ImportLine(msgspec.Struct, forbid_unknown_fields=True):
    session: str
    type: str
    actor: str
    payload: dict[str, Any] = msgspec.field(default_factory=dict)
    caused_by: list[str] = msgspec.field(default_factory=list)
    idempotency_key: str | None = None
    expected_seq: int | None = None


def register(app: typer.Typer) -> None:
    app.command(
        help="Append one event, or every line of a JSONL file; prints one JSON line per event, with its "
        "position (SESSION/SEQ, what a read's --after takes)."
    )(append)
    app.command(help="Print events in stream order; --follow keeps waiting for new ones.")(tail)


def append(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Session id ([A-Za-z0-9_-], 1-128 chars)")] = None,
    type: Annotated[str | None, typer.Option("--type", help="Event type, e.g. decision.made")] = None,
    actor: Annotated[str | None, typer.Option(help="Who appends: an agent, user or tool name")] = None,
    payload: Annotated[str, typer.Option(help="Payload as a JSON object")] = "{}",
    idempotency_key: Annotated[
        str | None,
        typer.Option(
            help="Repeat-safe key: the same request again returns the original event; another request "
            "with this key exits 4 and writes nothing"
        ),
    ] = None,
    expected_seq: Annotated[
        int | None,
        typer.Option(
            help="Append only if the session's newest event is this seq (0: only if it is new); "
            "otherwise exit 4 and write nothing"
        ),
    ] = None,
    from_file: Annotated[
        Path | None, typer.Option("--from", help="JSONL file of {session, type, actor, payload} lines")
    ] = None,
) -> None:
    settings = settings_of(ctx)
    if from_file is not None:
        if expected_seq is not None:
            fail("--expected-seq: with --from, give expected_seq on the file's lines", EXIT_INVALID)
        numbered = _read_import(from_file)
        places = [f"{from_file}:{number}: " for number, _ in numbered]
        requests = [request for _, request in numbered]
    else:
        missing = [
            name for name, value in (("session", session), ("type", type), ("actor", actor)) if not value
        ]
        if missing:
            fail(
                f"missing option(s): {', '.join('--' + m for m in missing)} (or use --from FILE)",
                EXIT_INVALID,
            )
        assert session is not None and type is not None and actor is not None
        requests = [
            AppendRequest(
                session=session,
                type=type,
                actor=actor,
                payload=_parse_payload(payload),
                idempotency_key=idempotency_key,
                expected_seq=expected_seq,
            )
        ]
        places = [""]
    principal = os_principal()  # who ran the command: recorded in each event's envelope
    requests = [msgspec.structs.replace(request, principal=principal) for request in requests]
    _validate_all(requests, places)
    run(_append(settings, requests, places))


def _parse_payload(text: str) -> dict[str, Any]:
    try:
        return decode_json_input(text, "payload", dict[str, Any])
    except EventValidationError as exc:
        fail(f"invalid input: {exc}", EXIT_INVALID)


def _read_import(path: Path) -> list[tuple[int, AppendRequest]]:
    """The file's requests, each with its line number."""
    requests = []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        fail(f"--from: cannot read {path}: {exc.strerror}", EXIT_INVALID)
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            line = decode_json_input(raw, "line", _ImportLine)
        except EventValidationError as exc:
            fail(f"invalid input: {path}:{number}: {exc}", EXIT_INVALID)
        requests.append((number, AppendRequest(**msgspec.structs.asdict(line))))
    return requests


def _validate_all(requests: list[AppendRequest], places: list[str]) -> None:
    """Reject the whole import before anything is written if any line is bad (`places`: where each is)."""
    for request, where in zip(requests, places, strict=True):
        try:
            request.validated()
        except EventValidationError as exc:
            fail(f"invalid input: {where}{exc}", EXIT_INVALID)


async def _append(settings: Settings, requests: list[AppendRequest], places: list[str]) -> None:
    """Append in file order, printing each stored event; the first refused line stops the import."""
    from eventloom.log import EventLog  # noqa: PLC0415 (imported when the command runs)

    done = 0
    async with await EventLog.open(settings, persistent=False) as log:
        with _progress(enabled=len(requests) > _IMPORT_CHUNK) as progress:
            task = progress.add_task("appending", total=len(requests))
            for segment in _segments(requests):
                outcomes = await log.append_settled(requests[segment.start : segment.stop])
                refused = [
                    (index, outcome)
                    for index, outcome in zip(segment, outcomes, strict=True)
                    if not isinstance(outcome, Appended)
                ]
                for outcome in outcomes:
                    if isinstance(outcome, Appended):
                        _print_appended(outcome)
                        done += 1
                if refused:
                    _stop(*refused[0], places, done, len(requests) - done)
                progress.advance(task, len(segment))


def _segments(requests: list[AppendRequest]) -> list[range]:
    """Runs of lines appended one after the other. A line that can be refused at the tail (it has an
    expected_seq or an idempotency_key) is a run of its own, so nothing after it is written if it is
    refused; the lines between are appended together, up to `_IMPORT_CHUNK` at a time."""
    runs: list[range] = []
    start = 0
    for index, request in enumerate(requests):
        conditional = request.expected_seq is not None or request.idempotency_key is not None
        if index > start and (conditional or index - start >= _IMPORT_CHUNK):
            runs.append(range(start, index))
            start = index
        if conditional:
            runs.append(range(index, index + 1))
            start = index + 1
    if start < len(requests):
        runs.append(range(start, len(requests)))
    return runs


def _stop(index: int, refusal: BaseException, places: list[str], done: int, left: int) -> NoReturn:
    """End the command on the first refused line, naming it and what was and was not written."""
    if not isinstance(refusal, EventloomError):
        raise refusal
    message = f"{places[index]}{message_of(refusal)}"
    if places[index]:  # from a file
        message += (
            f"\nimport stopped: {done} line(s) appended (printed on stdout), {left} not, from this one on"
        )
    fail(message, exit_code_of(refusal))


def _print_appended(appended: Appended) -> None:
    event = appended.event
    print_json(
        {
            "session": event.session,
            "seq": event.seq,
            "hash": event.hash,
            "citation": event.citation,
            "type": event.type,
            "ts": event.ts,
            "position": appended.position.text,  # what a read's --after takes to read this write
            "stream_seq": appended.position.stream_seq,
        }
    )


def _progress(*, enabled: bool) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=False,
        disable=not enabled,
    )


def tail(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Option(help="Only this session")] = None,
    from_seq: Annotated[int, typer.Option("--from-seq", min=1, help="Start at this event seq")] = 1,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Whole events as JSON lines")] = False,
) -> None:
    run(_tail(settings_of(ctx), session, from_seq, follow, as_json))


async def _tail(settings: Settings, session: str | None, from_seq: int, follow: bool, as_json: bool) -> None:
    from eventloom.log import EventLog  # noqa: PLC0415 (imported when the command runs)

    async with await EventLog.open(settings, persistent=follow) as log:
        reading = log.events(session, from_seq=from_seq, follow=follow)
        try:
            async for event in reading:
                if as_json:
                    print(encode_event(event).decode(), flush=True)
                else:
                    payload = msgspec.json.encode(event.payload).decode()
                    print(
                        f"{event.ts} {event.session}#{event.seq} {event.type} {event.actor} {payload[:160]}",
                        flush=True,
                    )
        except asyncio.CancelledError:
            pass
        finally:
            for warning in reading.warnings:  # on stderr: --json's stdout stays JSON lines
                console.print(f"[yellow]warning:[/] {warning}", highlight=False)
