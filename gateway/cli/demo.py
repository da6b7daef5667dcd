"""`eventloom demo`: a node, and a week of agent work told through a real MCP client (`eventloom mcp` on
stdio, exactly as an MCP client's configuration starts it); then what memory answers, and a green verify."""

from __future__ import annotations

import os
import shutil
import time
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from eventloom.ledger.files import ledger_sessions
from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from gateway.cli.common import EXIT_FAILED, EXIT_INVALID, console, fail, run, settings_of
from gateway.cli.demo_story import CHAT, WORK, Told, tell

DEMO_TOOLSETS = "default,review"


def register(app: typer.Typer) -> None:
    app.command(
        help="Start a node, tell a multi-session agent story through a real MCP client, and show the "
        "cited Memory Checkout, an as-of answer, the inferred and causal edges and a green verify."
    )(demo)


def demo(
    ctx: typer.Context,
    keep: Annotated[bool, typer.Option(help="Keep the demo data dir instead of starting fresh")] = False,
) -> None:
    settings = settings_of(ctx)
    if not keep:
        _start_fresh(settings)
    if not run(_demo(settings)):
        raise typer.Exit(EXIT_FAILED)


def _replayed(line: dict[str, Any]) -> str:
    """A replayed event as `type (what it says)`; the type alone when it says nothing more."""
    digest = line["digest"]
    return line["type"] if digest == line["type"] else f"{line['type']} ({digest})"


def _start_fresh(settings: Settings) -> None:
    """Empty the data dir for a new demo, but only when what it holds is a demo's: anything else is
    someone's memory."""
    data_dir = settings.data_dir
    if read_runtime(settings.runtime_file) is not None:
        fail(f"a node is running on {data_dir}: stop it (`eventloom down`) or give the demo its own dir")
    others = sorted(set(ledger_sessions(settings.ledger_dir)) - {WORK, CHAT, settings.audit_session})
    if others:
        fail(
            f"{data_dir} holds sessions the demo did not write ({', '.join(others[:3])}), and the demo "
            "starts fresh: give it a directory of its own (`eventloom --data-dir .eventloom-demo demo`, as "
            "`make demo` does) or pass --keep",
            EXIT_INVALID,
        )
    shutil.rmtree(data_dir, ignore_errors=True)


async def _demo(settings: Settings) -> bool:
    from mcp import Client  # noqa: PLC0415 (the MCP SDK and the node: imported when the demo runs)

    from gateway.mcp.client import stdio_server, tool_caller  # noqa: PLC0415
    from gateway.node import node_url  # noqa: PLC0415

    started = time.monotonic()
    async with node_url(settings) as url:
        console.print(
            f"[bold]1. node up[/]: embedded NATS at {url}, every role running, data in {settings.data_dir}"
        )
        # The demo shows the inferred edges' audit too, a tool of the `review` toolset.
        server = stdio_server(settings.data_dir, os.environ | {"EVENTLOOM_MCP_TOOLSETS": DEMO_TOOLSETS})
        async with Client(server, read_timeout_seconds=60) as client:
            tools = await client.list_tools()
            console.print(
                f"[bold]2. MCP client connected[/] to `eventloom mcp` over stdio: {len(tools.tools)} tools "
                f"(toolsets {DEMO_TOOLSETS})"
            )
            told = await tell(tool_caller(client))
        _show(told)
    console.print(
        f"[bold]done[/] in {time.monotonic() - started:.1f} s; node stopped, data kept in {settings.data_dir}"
    )
    return bool(told.answers["verify"]["ok"])


def _show(told: Told) -> None:
    table = Table(
        "step", "citation", title=f"3. the story, appended through memory_append (sessions {WORK}, {CHAT})"
    )
    for step, citation in told.citations.items():
        table.add_row(step, citation)
    console.print(table)
    handoff = told.answers["handoff"]
    console.print(
        f"[bold]4. handoff bundle[/] for bob: {handoff['summary']['events']} events, "
        f"integrity ok={handoff['integrity']['ok']}, last: "
        + escape("; ".join(_replayed(line) for line in handoff["replay"][-3:]))
    )
    checkout = told.answers["checkout"]
    prompt = Text(checkout["prompt"])  # plain text: its "[n]" citations are not markup
    panel = Panel(prompt, title="5. Memory Checkout (memory_search, prompt text)", expand=False)
    console.print(panel, soft_wrap=False)  # its long lines wrap inside the panel, none is cut
    console.print(f"   answerability: {escape(str(checkout['answerability']))}")
    _show_as_of(told)
    _show_edges(told)
    verify = told.answers["verify"]
    verdict = "[green]verified[/]" if verify["ok"] else "[red]FAILED[/]"
    for session in verify["sessions"]:
        console.print(
            f"[bold]9. memory_verify[/] {session['session']}: {verdict}: hash chain, Ed25519 signatures, "
            f"ledger {session['ledger_events']} = stream {session['stream_events']} events"
        )


def _show_as_of(told: Told) -> None:
    as_of = told.answers["as_of"]
    console.print(f"[bold]6. memory_search as of {told.events['fact']['ts']}[/] (before the revision):")
    for hit in as_of["hits"][:3]:
        window = f"valid {hit.get('valid_from')} .. {hit.get('valid_to') or 'now'}"
        cites = ", ".join(c["uri"] for c in hit.get("citations", [])[:2])
        line = f"   - {hit.get('entity') or hit.get('type')}: {hit.get('summary')}  ({window}; {cites})"
        console.print(escape(line))


def _show_edges(told: Told) -> None:
    status: dict[str, Any] = told.answers["inferred"]
    console.print(
        f"[bold]7. memory_inferred_status[/]: {status['edges']} edges by kind {status['by_kind']}, "
        f"methods {status['by_method']}, confidence mean {status['confidence'].get('mean')}, "
        f"evidence coverage {status['evidence_coverage']}, missing provenance {status['missing_provenance']}"
    )
    for label, key in (("caused it", "causes"), ("it caused", "effects")):
        for step in told.answers[key]["steps"]:
            edge = f"{step['cause']['name']} -[{step['relation_type']}, confidence {step['confidence']}, "
            edge += f"{step['review_status']}]-> {step['effect']['name']}"
            console.print(f"[bold]8. {key}[/] ({label}): {escape(edge)}")
