"""Shared by the web view's tests (no tests here): one node with the HTTP gateway, a seeded session, tokens.

The story, in session `web-demo`: a decision (`d-cache`, "5 minutes") made for a task, the task proposed,
a fact (two services, one depending on the other), an inferred edge, then the decision revised ("60
seconds"): its first version is superseded. Session `web-other` holds a decision of its own that a token
for `web-demo` must never see, and the other way round. When the claims pack's projector is installed, the
node runs it too and the story adds an observation, two claims and a resolution (`Told.claims`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.tokens import add_token
from readmodels.view import GRAPH_VIEWS_GROUP
from tests.conftest import NatsServer
from tests.mcp_support import http_node
from tests.runtime_support import drained

WEB = "web-demo"
OTHER = "web-other"


def claims_installed() -> bool:
    """The claims pack's projector and its graph view are installed (they are being written alongside)."""
    projectors = {entry.name for entry in entry_points(group="eventloom.projectors")}
    views = {entry.name for entry in entry_points(group=GRAPH_VIEWS_GROUP)}
    return "claims" in projectors and "claims" in views


@dataclass
class Told:
    """What was appended: the events by name, and the tokens."""

    base: str  # the gateway's root URL, e.g. http://127.0.0.1:41234
    events: dict[str, Event] = field(default_factory=dict)
    tokens: dict[str, str] = field(default_factory=dict)
    claims: bool = False

    def citation(self, name: str) -> str:
        return self.events[name].citation


async def tell(log: EventLog, told: Told) -> None:
    async def add(name: str, kind: str, payload: dict[str, Any], session: str = WEB) -> Event:
        told.events[name] = await log.append(session, kind, "agent:web", payload)
        return told.events[name]

    first = await add(
        "decision",
        "decision.made",
        {"decision_id": "d-cache", "title": "Cache prices in Redis for 5 minutes", "task_id": "t-cache"},
    )
    await add("task", "task.proposed", {"task_id": "t-cache", "title": "Cache price lookups"})
    await add(
        "fact",
        "memory.fact.asserted",
        {
            "entities": [
                {"name": "price cache", "entity_type": "service", "summary": "Redis cache of prices"},
                {"name": "checkout api", "entity_type": "service", "summary": "Takes the orders"},
            ],
            "relations": [{"source": "checkout api", "target": "price cache", "relation_type": "depends_on"}],
        },
    )
    await add(
        "inferred",
        "inference.edge.generated",
        {
            "source": "price cache",
            "target": "d-cache",
            "relation_type": "related_to",
            "confidence": 0.8,
            "method": "web_test",
            "evidence": [{"event_seq": first.seq, "event_hash": first.hash}],
        },
    )
    await add(
        "revised",
        "decision.made",
        {"decision_id": "d-cache", "title": "Cache prices in Redis for 60 seconds", "task_id": "t-cache"},
    )
    await add("secret", "decision.made", {"decision_id": "d-secret", "title": "The other plan"}, OTHER)
    if told.claims:
        await tell_claims(log, told)


async def tell_claims(log: EventLog, told: Told) -> None:
    """An observation, two claims resting on it, and a resolution settling the first."""
    seen = told.events["observation"] = await log.append(
        WEB,
        "claims.observation.recorded",
        "agent:web",
        {"content": "Alice joined Acme as CTO in May", "source": "chat", "mentions": ["Alice", "Acme"]},
    )
    basis = [{"session": WEB, "seq": seen.seq, "hash": seen.hash}]
    claim = {"subject": "Alice", "predicate": "WORKS_AT", "source_agent": "agent:web", "basis": basis}
    first = told.events["claim"] = await log.append(
        WEB, "claims.claim.asserted", "agent:web", {**claim, "object": "Acme", "confidence": 0.6}
    )
    told.events["claim2"] = await log.append(
        WEB, "claims.claim.asserted", "agent:web", {**claim, "object": "Acme Corp", "confidence": 0.7}
    )
    told.events["resolution"] = await log.append(
        WEB,
        "claims.claim.resolved",
        "agent:web",
        {
            **claim,
            "object": "Acme",
            "confidence": 0.9,
            "supersedes": [{"session": WEB, "seq": first.seq, "hash": first.hash}],
            "reason": "the press release",
        },
    )


@contextlib.asynccontextmanager
async def web_deployment(root: Path) -> AsyncIterator[Told]:
    """A NATS server, a node (graph projector, query service, HTTP gateway; the claims projector when
    installed), the story told and projected, and tokens: `admin` (every session), `demo` (`web-d*`),
    `other` (`web-other` only)."""
    (root / "nats").mkdir()
    server = NatsServer(root / "nats")
    server.start()
    claims = claims_installed()
    projectors = "graph,claims" if claims else "graph"
    settings = Settings(data_dir=root / "data", nats_url=server.url, projectors=projectors, producers="none")
    tokens = {
        "admin": add_token(settings.tokens_file, "admin", "admin", ["*"]),
        "demo": add_token(settings.tokens_file, "demo", "agent", ["web-d*"]),
        "other": add_token(settings.tokens_file, "other", "agent", [OTHER]),
    }
    try:
        async with http_node(settings) as node, await EventLog.open(settings) as log:
            assert node.http_url is not None
            told = Told(base=node.http_url.removesuffix("/mcp"), tokens=tokens, claims=claims)
            await tell(log, told)
            for projector in projectors.split(","):
                await drained(log, f"projector-{projector}", timeout=60)
            yield told
    finally:
        server.stop()
