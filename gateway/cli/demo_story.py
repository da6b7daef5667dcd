"""The demo's story, told through MCP tools only: two agents, two sessions, a week of work on a slow
checkout. Used by `eventloom demo` and by the tests that call every tool over stdio and HTTP.

Day 1 (alice, session `checkout-perf`): a goal, two tasks, a decision, a command and a file edit observed
under the task, a fact, the task completed citing the decision (the `decision_citation` producer infers an
edge), an outcome explained by the decision (the `causal` producer proposes a causal edge), a runbook
indexed with line numbers. Day 2 (bob): a handoff bundle of day 1, the fact revised (a new version
supersedes the old), a legacy service invalidated, a support chat (session `support-chat`) answered from
memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from gateway.mcp.client import ToolCall

WORK: Final = "checkout-perf"
CHAT: Final = "support-chat"
ALICE: Final = "agent:alice"
BOB: Final = "agent:bob"
RUNBOOK: Final = """# Price cache runbook

The price cache is Redis, keyed by SKU.
Entries expire after the TTL in pricing/cache.py.

## Stale prices
Flush with `redis-cli --scan --pattern 'price:*' | xargs redis-cli del`.
Then watch checkout p95 for ten minutes.
"""


@dataclass
class Told:
    """What the story appended (citations by step) and what the tools answered along the way."""

    citations: dict[str, str] = field(default_factory=dict)
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)


async def _append(
    call: ToolCall, told: Told, step: str, session: str, actor: str, type: str, payload: dict[str, Any]
) -> dict[str, Any]:
    event = await call(
        "memory_append", {"session": session, "type": type, "actor": actor, "payload": payload}
    )
    told.citations[step] = event["citation"]
    told.events[step] = event
    return event


async def day_one(call: ToolCall, told: Told) -> None:
    async def add(step: str, type: str, payload: dict[str, Any]) -> dict[str, Any]:
        return await _append(call, told, step, WORK, ALICE, type, payload)

    await add("goal", "goal.created", {"goal_id": "g-p95", "title": "Checkout p95 under 200 ms"})
    await add(
        "task", "task.proposed", {"task_id": "t-cache", "title": "Cache price lookups", "goal_id": "g-p95"}
    )
    await add(
        "task2",
        "task.proposed",
        {"task_id": "t-index", "title": "Index orders by customer", "goal_id": "g-p95"},
    )
    decision = await add(
        "decision",
        "decision.made",
        {
            "decision_id": "d-redis",
            "title": "Cache prices in Redis with a 5 minute TTL",
            "rationale": "Price lookups are 70% of checkout time and prices change hourly",
            "alternatives": ["in-process LRU"],
            "task_id": "t-cache",
        },
    )
    await add(
        "command",
        "command.completed",
        {"command": "pytest tests/pricing -q", "exit_code": 0, "output": "31 passed", "task_id": "t-cache"},
    )
    await add(
        "edit",
        "file.edit.applied",
        {
            "path": "pricing/cache.py",
            "change_kind": "create",
            "line_start": 1,
            "line_end": 42,
            "task_id": "t-cache",
        },
    )
    await add(
        "fact",
        "memory.fact.asserted",
        {
            "entities": [
                {
                    "name": "price cache",
                    "entity_type": "service",
                    "summary": "Redis cache of prices, TTL 5 minutes",
                },
                {"name": "legacy price service", "entity_type": "service", "summary": "SOAP price lookups"},
            ],
            "relations": [{"source": "checkout api", "target": "price cache", "relation_type": "depends_on"}],
        },
    )
    await add(
        "completed",
        "task.completed",
        {
            "task_id": "t-cache",
            "summary": "Prices are served from Redis",
            "decision": "Cache prices in Redis with a 5 minute TTL",
            "decision_event_seq": decision["seq"],
            "decision_event_hash": decision["hash"],
        },
    )
    await add(
        "outcome",
        "outcome.explained",
        {
            "outcome": "Checkout p95 fell from 480 ms to 140 ms",
            "explanation": "Price lookups now hit Redis instead of the SOAP service",
            "taxonomy": "caused",
            "cause": "Cache prices in Redis with a 5 minute TTL",
            "cause_event_seq": decision["seq"],
            "cause_event_hash": decision["hash"],
        },
    )
    await add(
        "runbook",
        "document.indexed",
        {
            "path": "docs/runbooks/price-cache.md",
            "title": "Price cache runbook",
            "content": RUNBOOK,
            "chunks": [
                {"text": "The price cache is Redis, keyed by SKU.", "line_start": 3, "line_end": 3},
                {
                    "text": "Flush with `redis-cli --scan --pattern 'price:*' | xargs redis-cli del`.",
                    "line_start": 7,
                    "line_end": 7,
                },
            ],
        },
    )


async def day_two(call: ToolCall, told: Told) -> None:
    told.answers["handoff"] = await call("memory_handoff", {"session": WORK, "replay": 5})
    await asyncio.sleep(0.01)  # the revision's valid_from must be later than the first version's
    await _append(
        call,
        told,
        "revised",
        WORK,
        BOB,
        "memory.fact.asserted",
        {
            "entities": [
                {
                    "name": "price cache",
                    "entity_type": "service",
                    "summary": "Redis cache of prices, TTL 60 seconds since the stale-price incident",
                }
            ]
        },
    )
    invalidated = await call(
        "memory_invalidate",
        {
            "session": WORK,
            "entity": {"name": "legacy price service", "entity_type": "service"},
            "reason": "decommissioned: every lookup goes through the price cache",
        },
    )
    told.citations["invalidated"] = invalidated["citation"]
    told.answers["turn"] = await call(
        "memory_record_turn",
        {
            "session": CHAT,
            "text": "A customer saw an old price at checkout. How long can prices be stale?",
            "speaker": "Dana",
        },
    )
    told.citations["turn"] = told.answers["turn"]["turn"]


async def wait_for(
    call: ToolCall,
    name: str,
    arguments: dict[str, Any],
    done: Callable[[dict[str, Any]], bool],
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """Ask until the read models have caught up with what was appended (they follow the log)."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        answer = await call(name, arguments)
        if done(answer) or asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.2)


def _summaries(result: dict[str, Any]) -> str:
    return " ".join(str(hit.get("summary", "")) for hit in result.get("hits", []))


async def caught_up(call: ToolCall, told: Told) -> None:
    """Until the producers' edges and the revision are in the read models."""
    await wait_for(call, "memory_inferred_status", {"session": WORK}, lambda s: s["edges"] >= 2)
    await wait_for(
        call,
        "memory_search",
        {"question": "price cache TTL", "session": WORK, "answer": "hits", "limit": 5},
        lambda r: "60 seconds" in _summaries(r),
    )


async def ask(call: ToolCall, told: Told) -> None:
    """The questions the demo prints answers to."""
    told.answers["checkout"] = await call(
        "memory_search",
        {
            "question": "How long are prices cached, and why?",
            "session": WORK,
            "answer": "checkout",
            "token_budget": 900,
        },
    )
    first_version_at = told.events["fact"]["ts"]
    as_of = {"question": "price cache TTL", "session": WORK, "as_of": first_version_at}
    told.answers["as_of"] = await call("memory_search", as_of | {"answer": "hits", "limit": 3})
    told.answers["inferred"] = await call("memory_inferred_status", {"session": WORK})
    told.answers["causes"] = await call(
        "memory_causal", {"session": WORK, "name": "Checkout p95 fell from 480 ms to 140 ms", "ask": "causes"}
    )
    told.answers["effects"] = await call(
        "memory_causal",
        {"session": WORK, "name": "d-redis", "ask": "effects"},  # the decision it cited
    )
    told.answers["verify"] = await call("memory_verify", {"session": WORK})


async def tell(call: ToolCall) -> Told:
    told = Told()
    await day_one(call, told)
    await wait_for(call, "memory_inferred_status", {"session": WORK}, lambda s: s["edges"] >= 2)
    await day_two(call, told)
    await caught_up(call, told)
    await ask(call, told)
    return told
