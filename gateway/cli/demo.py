"""`eventloom demo`: an embedded node, a scripted agent session, a green verify, the ledger."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from typing import Annotated, Any

import typer
from rich.table import Table

from eventloom.appender import AppendRequest
from eventloom.event import decode_event
from eventloom.keys import KeyStore
from eventloom.ledger.files import ledger_path
from eventloom.log import EventLog
from eventloom.settings import Settings
from eventloom.verify import verify_everything
from gateway.cli.common import EXIT_FAILED, console, fail, run, settings_of
from gateway.node import Node

SESSION = "demo-refactor-auth"
AGENT = "agent:claude"


def story() -> list[tuple[str, dict[str, Any]]]:
    """A small agent session: goal, task, decision, observations, completion citing the decision."""
    return [
        ("session.started", {"agent": AGENT, "goal": "Make login survive token expiry"}),
        ("goal.created", {"goal_id": "g1", "title": "Login survives token expiry"}),
        ("task.proposed", {"task_id": "t1", "title": "Refresh tokens before they expire", "goal_id": "g1"}),
        ("task.claimed", {"task_id": "t1", "assignee": AGENT}),
        (
            "decision.made",
            {
                "decision_id": "d1",
                "title": "Refresh 60 s before expiry",
                "rationale": "Clock skew between services is under 30 s",
                "alternatives": ["retry on 401"],
                "task_id": "t1",
            },
        ),
        (
            "file.edit.applied",
            {
                "path": "auth/session.py",
                "change_kind": "modify",
                "line_start": 40,
                "line_end": 58,
                "task_id": "t1",
            },
        ),
        (
            "command.completed",
            {
                "command": "pytest tests/auth -q",
                "exit_code": 0,
                "output": "14 passed",
                "duration_ms": 2310,
                "task_id": "t1",
            },
        ),
        (
            "memory.fact.asserted",
            {
                "entities": [
                    {
                        "name": "auth service",
                        "entity_type": "service",
                        "summary": "Refreshes tokens 60 s before expiry",
                        "properties": {"owner": "platform"},
                    }
                ],
                "relations": [],
            },
        ),
        ("task.completed", {"task_id": "t1", "summary": "Tokens refresh ahead of expiry"}),
        ("session.ended", {"reason": "done", "summary": "Token refresh shipped and tested"}),
    ]


def register(app: typer.Typer) -> None:
    app.command(
        help="Run a whole node in-process, append a scripted agent session, verify it, show the ledger."
    )(demo)


def demo(
    ctx: typer.Context,
    keep: Annotated[bool, typer.Option(help="Keep the demo data dir instead of starting fresh")] = False,
) -> None:
    settings = settings_of(ctx)
    if not keep:
        shutil.rmtree(settings.data_dir, ignore_errors=True)
    ok = run(_demo(settings))
    if not ok:
        raise typer.Exit(EXIT_FAILED)


async def _demo(settings: Settings) -> bool:
    stop = asyncio.Event()
    node = Node(settings)
    node_task = asyncio.create_task(node.run(stop))
    try:
        await _wait_ready(node, node_task)
        console.print(f"[bold]1. node up[/]: embedded NATS at {node.url}, data dir {settings.data_dir}")
        async with await EventLog.open(settings, url=node.url) as log:
            requests = [AppendRequest(session=SESSION, type=t, actor=AGENT, payload=p) for t, p in story()]
            events = await log.append_many(requests)
            decision = next(e for e in events if e.type == "decision.made")
            cited = await log.append(
                SESSION,
                "verification.recorded",
                AGENT,
                {"subject": "token refresh", "passed": True, "details": f"implements {decision.citation}"},
                caused_by=[decision.hash],
            )
            events.append(cited)
            console.print(
                f"[bold]2. appended[/] {len(events)} signed, hash-chained events to session {SESSION}"
            )
            keyring = await asyncio.to_thread(KeyStore(settings.data_dir).load_keyring)
            report = await verify_everything(log.client, log.layout, keyring, settings.ledger_dir, wait_s=10)
        await asyncio.to_thread(_show_ledger, settings, events[-1].seq)
        verdict = "[green]verified[/]" if report.ok else "[red]FAILED[/]"
        for item in report.sessions:
            console.print(
                f"[bold]4. verify[/] {item.session}: {verdict} - chain, hashes, Ed25519 signatures, "
                f"ledger {item.ledger_events} = stream {item.stream_events} events"
            )
        return report.ok
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await node_task
        console.print("[bold]5. node stopped[/]")


async def _wait_ready(node: Node, node_task: asyncio.Task[None]) -> None:
    ready = asyncio.create_task(node.ready.wait())
    await asyncio.wait({ready, node_task}, return_when=asyncio.FIRST_COMPLETED, timeout=30)
    if not node.ready.is_set():
        ready.cancel()
        if node_task.done() and node_task.exception() is not None:
            raise node_task.exception()  # type: ignore[misc]
        fail("the node did not start within 30 s")


def _show_ledger(settings: Settings, expected: int) -> None:
    path = ledger_path(settings.ledger_dir, SESSION)
    table = Table("seq", "type", "hash", "prev_hash", "key", title=f"3. ledger {path}")
    for line in path.read_bytes().splitlines()[:expected]:
        event = decode_event(line)
        table.add_row(
            str(event.seq), event.type, event.hash[:12], (event.prev_hash or "-")[:12], event.key_id
        )
    console.print(table)
