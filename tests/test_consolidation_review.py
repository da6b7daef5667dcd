"""Review and promotion end to end: MCP over HTTP with tokens (an agent proposes but cannot review, a
reviewer accepts, the promoted memory answers with the candidate's citations, a retraction undoes it), and
the CLI (`eventloom memory consolidation ... --json`), on one node."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.tokens import add_token
from tests.conftest import run_cli
from tests.mcp_support import failure, http_node, http_tools
from tests.test_query_service import projected

pytestmark = pytest.mark.anyio
SESSION = "cons-1"


def _fact(source: str, target: str) -> dict[str, Any]:
    return {
        "entities": [
            {"name": source, "entity_type": "service", "summary": f"{source} service"},
            {"name": target, "entity_type": "database", "summary": f"{target} database"},
        ],
        "relations": [{"source": source, "target": target, "relation_type": "depends_on"}],
    }


def _ref(event: Event) -> dict[str, Any]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def _proposal(sources: list[Event]) -> dict[str, Any]:
    return {
        "session": SESSION,
        "candidate_id": "cand-auth-pg",
        "candidate_type": "claim",
        "title": "auth-service depends_on postgres",
        "summary": "Consolidated: the gatekeeper relies on the orders ledger store, asserted twice.",
        "source_events": [_ref(e) for e in sources],
        "confidence": 0.9,
        "purpose": "One cited fact instead of two repeated assertions.",
        "about": [{"name": "auth-service", "entity_type": "service"}],
    }


async def _facts(settings: Settings) -> list[Event]:
    async with await EventLog.open(settings) as log:
        return [
            await log.append(SESSION, "memory.fact.asserted", "agent:a", _fact("auth-service", "postgres"))
            for _ in range(2)
        ]


async def _settle(settings: Settings) -> None:
    async with await EventLog.open(settings) as log:
        await projected(log)


async def test_agent_proposes_reviewer_promotes_and_retracts(settings: Settings) -> None:
    settings = replace(settings, producers="none")
    toolsets = ["default", "review"]
    agent = add_token(settings.tokens_file, "agent", "agent", ["cons-*"], toolsets=toolsets)
    reviewer = add_token(settings.tokens_file, "alice", "agent", ["*"], may_review=True, toolsets=toolsets)
    async with http_node(settings) as node:
        url = node.http_url or ""
        sources = await _facts(settings)
        async with http_tools(url, agent) as call:
            proposed = await call("memory_consolidation_candidate", _proposal(sources))
            assert proposed["action"] == "proposed" and proposed["session"] == SESSION
            review = {
                "candidate_id": "cand-auth-pg",
                "verdict": "accepted",
                "rationale": "ok",
                "session": SESSION,
            }
            refused = await failure(call, "memory_consolidation_review", review)
            assert refused.code == "forbidden" and "review rights" in refused.error["message"]
            direct = {"session": SESSION, "type": "consolidation.candidate.reviewed", "payload": {}}
            assert (await failure(call, "memory_append", direct)).code == "forbidden"
            edge = {
                "source": "a",
                "target": "b",
                "relation_type": "same_as",
                "confidence": 0.5,
                "method": "m",
            }
            accepted_edge = {
                **direct,
                "type": "inference.edge.generated",
                "payload": {**edge, "review_status": "accepted"},
            }
            assert (await failure(call, "memory_append", accepted_edge)).code == "forbidden"
            bad = {**_proposal(sources), "source_events": [{**_ref(sources[0]), "seq": 99}]}
            missing = await failure(call, "memory_consolidation_candidate", bad)
            assert missing.code == "invalid_input" and "source_events[0]" in missing.error["message"]
            await _settle(settings)
            listed = await call("memory_consolidation_candidate", {"session": SESSION, "status": "pending"})
            assert [c["candidate_id"] for c in listed["candidates"]] == ["cand-auth-pg"]
        async with http_tools(url, reviewer) as call:
            first = await call("memory_consolidation_review", review)
            again = await call("memory_consolidation_review", review)  # before it is projected: deduplicated
            assert [e["type"] for e in first["events"]] == [
                "consolidation.candidate.reviewed",
                "consolidation.candidate.promoted",
            ]
            assert again["events"] == first["events"]
            await _settle(settings)
            shown = await call(
                "memory_consolidation_candidate", {"candidate_id": "cand-auth-pg", "session": SESSION}
            )
            assert shown["status"] == "promoted"
            assert [(s["status"], s["by"]) for s in shown["history"]][1:] == [
                ("accepted", "alice"),
                ("promoted", "alice"),
            ]
            repeated = await failure(call, "memory_consolidation_review", review)
            assert "already promoted" in repeated.error["message"]
            hits = await _memory_hits(call)
            assert len(hits) == 1 and hits[0]["valid_to"] is None and hits[0].get("proposal") is None
            cited = {c["uri"] for c in hits[0]["citations"]}
            assert {f"eventloom://{SESSION}/events/{e.seq}#{e.hash[:12]}" for e in sources} <= cited
            retraction = {
                "candidate_id": "cand-auth-pg",
                "reason": "postgres replaced",
                "retracted_by": "alice",
            }
            await call(
                "memory_append",
                {"session": SESSION, "type": "consolidation.promotion.retracted", "payload": retraction},
            )
            await _settle(settings)
            assert await _memory_hits(call) == []


async def _memory_hits(call: Any) -> list[dict[str, Any]]:
    asked = {"question": "gatekeeper orders ledger store", "session": SESSION, "answer": "hits"}
    result = await call("memory_search", asked)
    return [h for h in result["hits"] if h["type"] == "claim" and h["valid_to"] is None]


def _cli(settings: Settings, *args: str) -> Any:
    done = run_cli(settings, "memory", "consolidation", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_cli_proposes_lists_shows_and_reviews(settings: Settings) -> None:
    settings = replace(settings, producers="none")
    async with http_node(settings):
        sources = await _facts(settings)
        source = f"{SESSION}:{sources[0].seq}:{sources[0].hash}"
        args = ["propose", "--session", SESSION, "--type", "episode", "--title", "t", "--summary", "s"]
        args += ["--purpose", "p", "--source", source, "--id", "cand-cli", "--about", "auth-service:service"]
        proposed = await asyncio.to_thread(_cli, settings, *args)
        assert proposed["events"][0]["type"] == "consolidation.candidate.created"
        # the last hex digit changed, so the hash differs (it always does: 1 in 16 ended in 0 already)
        forged = source[:-1] + ("1" if source.endswith("0") else "0")
        wrong = await asyncio.to_thread(
            run_cli, settings, *("memory", "consolidation", *args[:-4]), "--source", forged
        )
        assert wrong.returncode == 2 and "source_events[1]" in wrong.stderr and "cited hash" in wrong.stderr
        await _settle(settings)
        listed = await asyncio.to_thread(_cli, settings, "list", "--session", SESSION, "--type", "episode")
        assert [c["candidate_id"] for c in listed["candidates"]] == ["cand-cli"]
        deferred = await asyncio.to_thread(
            _cli,
            settings,
            "review",
            "cand-cli",
            "--verdict",
            "deferred",
            "--rationale",
            "need more",
            "--reviewer",
            "bob",
        )
        assert deferred["action"] == "deferred"
        await _settle(settings)
        shown = await asyncio.to_thread(_cli, settings, "show", "cand-cli")
        assert shown["status"] == "deferred" and shown["history"][-1]["rationale"] == "need more"
        async with await EventLog.open(settings) as log:
            same = {
                "edge_id": "sa-9",
                "source": "auth-service",
                "target": "auth svc",
                "relation_type": "same_as",
            }
            evidence = [{"event_seq": sources[0].seq, "event_hash": sources[0].hash}]
            edge = {**same, "confidence": 0.8, "method": "normalised_name", "evidence": evidence}
            await log.append(SESSION, "inference.edge.generated", "producer:er", edge)
        await _settle(settings)
        accepted = await asyncio.to_thread(
            _cli, settings, "review", "sa-9", "--verdict", "accepted", "--rationale", "same service"
        )
        assert accepted["kind"] == "same_as"
        assert [e["type"] for e in accepted["events"]] == [
            "consolidation.candidate.reviewed",
            "inference.edge.generated",
        ]
        async with await EventLog.open(settings) as log:
            reasserted = [e async for e in log.events(SESSION)][-1]
        assert reasserted.payload == {**edge, "review_status": "accepted"}
        unknown = await asyncio.to_thread(
            run_cli,
            settings,
            "memory",
            "consolidation",
            "review",
            "nope",
            "--verdict",
            "accepted",
            "--rationale",
            "x",
        )
        assert unknown.returncode == 2 and "candidate_id" in unknown.stderr
