"""What MCP costs on top of the query service and the appender; prints one JSON object.

A node runs in its own process (`eventloom up`: embedded NATS, every role) with a synthetic agent memory
(bench/corpus.py, 10,000 events by default). The same questions are then asked, one after another, three ways:
  raw    `MemoryClient.checkout` over NATS request/reply: what a gateway itself pays (the baseline);
  stdio  the official MCP client to `eventloom mcp` (a subprocess on the same node), tool `memory_search`
         (answer "checkout");
  http   the official MCP client over streamable HTTP with a bearer token to `eventloom gateway http` (its
         own process, as in docker-compose), tool `memory_search` (answer "checkout").
Appends are measured the same way (`EventLog.append` vs tool `memory_append`). Every MCP call also appends
its `tool.call.completed` audit event before it answers, so that cost is inside the MCP numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import nats.js.errors
from common import console, machine, percentiles, progress_bar, server_binary_version
from corpus import Corpus
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from query import append_up_to, timed

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.tokens import add_token
from gateway.mcp.client import ToolCall, stdio_server, tool_caller
from gateway.node_process import NodeProcess
from readmodels.checkout.model import CheckoutRequest
from readmodels.query.client import MemoryClient

MEMORY_CONSUMERS = ("projector-graph", "projector-keyword", "projector-vector", "projector-inferred")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events in the log first (default 10000)")
    parser.add_argument("--calls", type=int, default=200, help="measured calls per way (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured calls first (default 20)")
    parser.add_argument("--sessions", type=int, default=20, help="sessions in the log (default 20)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def projected(log: EventLog, timeout_s: float = 900) -> None:
    """Until every memory projector has applied everything appended so far."""
    js = log.client.jetstream()
    deadline = asyncio.get_running_loop().time() + timeout_s
    for consumer in MEMORY_CONSUMERS:
        while True:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                info = await js.consumer_info(log.layout.name, consumer)
                if not info.num_pending and not info.num_ack_pending:
                    break
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"{consumer} did not catch up")
            await asyncio.sleep(0.2)


@contextlib.asynccontextmanager
async def mcp_ways(settings: Settings, http_url: str, token: str) -> AsyncIterator[dict[str, ToolCall]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        Client(stdio_server(settings.data_dir), read_timeout_seconds=60) as stdio,
        httpx2.AsyncClient(headers=headers, timeout=60) as http_client,
        Client(streamable_http_client(http_url, http_client=http_client), read_timeout_seconds=60) as http,
    ):
        yield {"stdio": tool_caller(stdio), "http": tool_caller(http)}


def measured(samples: list[float], baseline: list[float]) -> dict[str, Any]:
    ms, base = percentiles(samples), percentiles(baseline)
    return {**ms, "overhead_p50_ms": round(ms["p50"] - base["p50"], 2)}


async def each(calls: list[Callable[[], Awaitable[Any]]], warmup: int) -> list[float]:
    await timed(calls[:warmup])
    samples, _ = await timed(calls[warmup:])
    return samples


def tool(call: ToolCall, name: str, arguments: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: call(name, arguments)


def raw_checkout(memory: MemoryClient, text: str, session: str | None) -> Callable[[], Awaitable[Any]]:
    return lambda: memory.checkout(CheckoutRequest(text=text, session=session))


def raw_append(log: EventLog, session: str, payload: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    return lambda: log.append(session, "x.note.taken", "bench", payload)


async def measure(
    log: EventLog, ways: dict[str, ToolCall], corpus: Corpus, args: argparse.Namespace
) -> dict[str, Any]:
    memory = MemoryClient(log.client)
    questions = corpus.questions(args.warmup + args.calls)
    raw = await each([raw_checkout(memory, text, session) for text, session in questions], args.warmup)
    report: dict[str, Any] = {"checkout_ms": {"raw_query_service": percentiles(raw)}}
    for name, call in ways.items():
        asked = [
            tool(call, "memory_search", {"question": text, "session": session, "answer": "checkout"})
            for text, session in questions
        ]
        report["checkout_ms"][f"mcp_{name}"] = measured(await each(asked, args.warmup), raw)
    count = args.warmup + args.calls
    payload = {"text": "one more observation from the benchmark"}
    raw_appends = await each(
        [raw_append(log, f"bench-raw-{n % 8}", payload) for n in range(count)], args.warmup
    )
    report["append_ms"] = {"raw_event_log": percentiles(raw_appends)}
    for name, call in ways.items():
        appends = [
            tool(
                call,
                "memory_append",
                {"session": f"bench-{name}-{n % 8}", "type": "x.note.taken", "payload": payload},
            )
            for n in range(count)
        ]
        report["append_ms"][f"mcp_{name}"] = measured(await each(appends, args.warmup), raw_appends)
    return report


async def start_gateway(settings: Settings) -> tuple[asyncio.subprocess.Process, str]:
    """`eventloom gateway http` in its own process on the running node; returns it and its MCP URL."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "gateway",
        "http",
        "--listen",
        f"127.0.0.1:{port}",
        env={**os.environ, **settings.to_env()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with httpx2.AsyncClient() as http:
        for _ in range(300):
            with contextlib.suppress(httpx2.HTTPError):
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return process, f"http://127.0.0.1:{port}/mcp"
            await asyncio.sleep(0.1)
    process.kill()
    raise TimeoutError("eventloom gateway http did not start")


async def main(args: argparse.Namespace) -> dict[str, Any]:
    started = datetime.now(UTC)
    report: dict[str, Any] = {
        "benchmark": "mcp_gateway",
        "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/mcp_gateway.py " + " ".join(sys.argv[1:]),
        "machine": machine(server_binary_version()),
        "events": args.events,
        "calls": args.calls,
    }
    with tempfile.TemporaryDirectory(prefix="eventloom-bench-mcp-") as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", gateway_rate=100_000)  # measure, not throttle
        token = add_token(settings.tokens_file, "bench", "admin", ["*"])
        node = NodeProcess(settings)
        info = await asyncio.to_thread(node.start, 60)
        gateway: asyncio.subprocess.Process | None = None
        try:
            gateway, http_url = await start_gateway(settings)
            corpus = Corpus(sessions=args.sessions)
            async with await EventLog.open(settings, url=info.nats_url) as log:
                await append_up_to(log, corpus, 0, args.events)
                with progress_bar() as progress:
                    progress.add_task("projecting", total=None, rate="")
                    await projected(log)
                console.print("[bold]measuring[/] raw, stdio and HTTP")
                async with mcp_ways(settings, http_url, token) as ways:
                    report.update(await measure(log, ways, corpus, args))
        finally:
            if gateway is not None:
                gateway.terminate()
                await gateway.wait()
            await asyncio.to_thread(node.stop)
    return report


if __name__ == "__main__":
    print(msgspec.json.encode(asyncio.run(main(parse_args()))).decode())
