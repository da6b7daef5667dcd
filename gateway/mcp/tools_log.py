"""Tools over the log itself: verify it, replay it (admin), and read the graph with Cypher (admin)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated, Any, Final

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from eventloom.keys import KeyStore
from eventloom.verify import verify_everything
from gateway.access.backend import Backend
from gateway.mcp.arguments import Limit, Session, SessionFilter
from readmodels.query.cypher_service import MAX_QUERY_CHARS, ask_cypher

ADMIN_TOOLS: Final = frozenset({"memory_replay", "memory_graph_query"})
VERIFY_WAIT_S: Final = 2.0
VERIFY = """Prove the log is intact before you trust or hand over memory: every event's hash chain and \
Ed25519 signature, seq continuity, and that the signed JSONL ledger matches the stream; the first broken \
seq of each session if not. Example: {"session": "checkout-perf"}."""
REPLAY = """(admin) A session's events in order, whole and signed, from from_seq; next_seq pages on. \
Messages on its subject that are not events are skipped and counted (skipped, warnings)."""
GRAPH_QUERY = """(admin) One read-only Cypher statement against the graph read model (docs/graph-schema.md). \
Writes, several statements and transaction control are refused."""


def register_log_tools(server: MCPServer, backend: Backend) -> None:
    @server.tool(description=VERIFY)
    async def memory_verify(session: SessionFilter = None) -> dict[str, Any]:
        log = backend.log
        keyring = await asyncio.to_thread(KeyStore(log.settings.data_dir).load_keyring)
        report = await verify_everything(
            log.client, log.layout, keyring, log.settings.ledger_dir, session=session, wait_s=VERIFY_WAIT_S
        )
        return dict(msgspec.to_builtins(report))

    @server.tool(description=REPLAY)
    async def memory_replay(
        session: Session,
        from_seq: Annotated[int, Field(ge=1, description="The first seq to return.")] = 1,
        limit: Limit = 100,
    ) -> dict[str, Any]:
        events: list[dict[str, Any]] = []
        more = False
        reading = backend.log.events(session, from_seq=from_seq)
        async with contextlib.aclosing(reading):
            async for event in reading:
                if len(events) == limit:
                    more = True
                    break
                events.append(msgspec.to_builtins(event))
        next_seq = events[-1]["seq"] + 1 if more else None
        return {
            "session": session,
            "events": events,
            "next_seq": next_seq,
            "skipped": reading.skipped,
            "warnings": reading.warnings,
        }

    @server.tool(description=GRAPH_QUERY)
    async def memory_graph_query(
        cypher: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)],
        params: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        rows = await ask_cypher(backend.log.client, cypher, params or {})
        return {"rows": rows, "count": len(rows)}
