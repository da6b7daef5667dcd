"""The MCP gateway through the official MCP client, over stdio (`eventloom mcp`, a real subprocess) and
streamable HTTP (the node's gateway): every tool, the limits, the bearer tokens and session scopes, the
rate limit and the audit trail."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client

from eventloom.event import os_principal
from eventloom.log import EventLog
from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from gateway.access.tokens import Principal, TokenBook, add_token, read_tokens
from gateway.cli.demo_story import WORK
from gateway.mcp.client import stdio_server, tool_caller
from gateway.mcp.gate import FailedAttempts, RateLimiter
from tests.conftest import run_cli
from tests.mcp_support import (
    EVERY_TOOL,
    EVERY_TOOLSET,
    exercise_every_tool,
    exercise_limits,
    failure,
    http_gateway,
    http_node,
    http_tools,
)
from tests.test_query_service import start_node

pytestmark = pytest.mark.anyio


def flattened(error: BaseException) -> list[str]:
    """The messages of an exception and of everything inside it (an exception group, a cause)."""
    inner = list(error.exceptions) if isinstance(error, BaseExceptionGroup) else []
    inner += [error.__cause__] if error.__cause__ is not None else []
    return [str(error), *(message for nested in inner for message in flattened(nested))]


ANSWERS = ("prompt", "checkout", "hits")


def clean_env() -> dict[str, str]:
    """This process's environment without Eventloom's settings, as a fresh MCP client would have it."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}


async def test_stdio_starts_its_own_node_and_serves_every_tool(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Client(stdio_server(data, clean_env() | EVERY_TOOLSET), read_timeout_seconds=60) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == EVERY_TOOL
        running = read_runtime(data / "runtime.json")
        assert running is not None and running.pid != os.getpid() and running.embedded
        call = tool_caller(client)
        await exercise_every_tool(call)
        await exercise_limits(call)
    assert read_runtime(data / "runtime.json") is None  # the node it started stopped with it
    audit = [
        json.loads(line) for line in (data / "ledger" / "eventloom-audit.jsonl").read_text().splitlines()
    ]
    assert {event["type"] for event in audit} == {"tool.call.completed"}
    assert all(event["payload"]["principal"] == "local" for event in audit)


async def test_stdio_uses_the_node_already_running(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    async for node in start_node(replace(settings, producers="none")):
        async with Client(stdio_server(settings.data_dir, clean_env()), read_timeout_seconds=60) as client:
            call = tool_caller(client)
            appended = await call(
                "memory_append", {"session": "s1", "type": "x.note.taken", "payload": {"text": "hello"}}
            )
        async with await EventLog.open(settings, url=node.url) as log:
            (event,) = [e async for e in log.events("s1")]
        assert event.citation == appended["citation"] and event.actor == "mcp:local"
        assert event.principal == os_principal()  # who started the stdio server


async def test_http_serves_every_tool_to_an_admin(settings: Settings) -> None:
    token = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["all"])
    async with http_node(settings) as node:
        assert node.http_url is not None
        async with http_tools(node.http_url, token) as call:
            await exercise_every_tool(call)
            await exercise_limits(call)
        async with await EventLog.open(settings) as log:
            audit = [e async for e in log.events(settings.audit_session)]
    appends = [e.payload for e in audit if e.payload["tool"] == "memory_append"]
    assert appends and appends[0]["arguments"] == ["actor", "payload", "session", "type"]
    assert appends[0]["principal"] == "operator" and appends[0]["transport"] == "http"
    assert appends[0]["target_session"] == WORK and appends[0]["ok"] is True
    refusal = next(e.payload for e in audit if e.payload["status"] == "payload_too_large")
    assert refusal["ok"] is False and refusal["error"] == "payload_too_large"
    audit_text = json.dumps([e.payload for e in audit])
    assert "Redis" not in audit_text and "xxxx" not in audit_text  # names, never values


async def test_http_refuses_a_missing_or_wrong_token(settings: Settings) -> None:
    add_token(settings.tokens_file, "agent", "agent", ["*"])
    async with http_node(settings) as node:
        assert node.http_url is not None
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx2.AsyncClient(timeout=10) as http:
            for headers in (
                {},
                {"Authorization": "Bearer elt_not-a-real-token"},
                {"Authorization": "Basic x"},
            ):
                response = await http.post(node.http_url, json=ping, headers=headers)
                assert response.status_code == 401
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert response.json()["error"]["code"] == "unauthorized"
            health = await http.get(node.http_url.removesuffix("/mcp") + "/healthz")
            # a query service answers; nothing else is said to a caller without a token
            assert health.status_code == 200 and health.json() == {"ok": True, "failing": {}}
        with pytest.raises(BaseException) as refused:
            async with http_tools(node.http_url, "elt_wrong") as call:
                await call("memory_search", {"question": "anything", "session": "s1"})
        assert "error response" in " ".join(flattened(refused.value))  # the 401 above, as the client sees it


async def test_http_enforces_the_session_scope_for_reads_and_writes(settings: Settings) -> None:
    token = add_token(
        settings.tokens_file, "team-a-bot", "agent", ["team-a-*"], toolsets=["default", "review"]
    )
    async with http_node(settings) as node, http_tools(node.http_url or "", token) as call:
        note = {"session": "team-a-1", "type": "x.note.taken", "payload": {"n": 1}}
        mine = await call("memory_append", note)
        assert mine["seq"] == 1
        theirs = {"session": "team-b-1"}
        denied: list[tuple[str, dict[str, Any]]] = [
            ("memory_append", {**theirs, "type": "x.note.taken", "payload": {"n": 1}}),
            ("memory_invalidate", {**theirs, "entity": {"name": "x", "entity_type": "service"}}),
            ("memory_record_turn", {**theirs, "text": "hello"}),
            *[("memory_search", {**theirs, "question": "notes", "answer": a}) for a in ANSWERS],
            ("memory_handoff", theirs),
            ("memory_verify", theirs),
            ("memory_inferred_status", theirs),
            *[("memory_causal", {**theirs, "name": "x", "ask": ask}) for ask in ("causes", "effects", "why")],
            ("memory_causal", {**theirs, "name": "x", "ask": "path", "target": "y"}),
            ("memory_search", {"question": "notes", "answer": "hits"}),  # every session at once
            ("memory_verify", {}),
            ("memory_replay", {"session": "team-a-1"}),  # admin only
            ("memory_graph_query", {"cypher": "MATCH (n) RETURN count(n) AS n"}),
        ]
        for name, arguments in denied:
            refused = await failure(call, name, arguments)
            assert refused.code == "forbidden", (name, refused.error)
        own = await call("memory_search", {"question": "notes", "session": "team-a-1", "answer": "hits"})
        assert own["query"]["session"] == "team-a-1"
        async with await EventLog.open(settings) as log:
            assert [e async for e in log.events("team-b-1")] == []


async def test_a_token_appends_only_as_its_actors_and_the_event_names_it(settings: Settings) -> None:
    bot = add_token(settings.tokens_file, "bot", "agent", ["*"])  # default actors: mcp:bot, agent:bot
    ci = add_token(settings.tokens_file, "ci", "agent", ["*"], actors=["agent:ci-*"])
    note = {"session": "who", "type": "x.note.taken", "payload": {"text": "x"}}
    async with http_node(settings) as node:
        url = node.http_url or ""
        async with http_tools(url, bot) as call:
            assert (await call("memory_append", note))["seq"] == 1  # as mcp:bot
            assert (await call("memory_append", note | {"actor": "agent:bot"}))["seq"] == 2
            posing = await failure(call, "memory_append", note | {"actor": "agent:admin"})
            assert posing.code == "forbidden" and posing.error["message"].startswith("actor:")
        async with http_tools(url, ci) as call:
            assert (await call("memory_append", note | {"actor": "agent:ci-build"}))["seq"] == 3
            default = await failure(call, "memory_append", note)  # mcp:ci is not among its actors
            assert default.code == "forbidden"
        async with await EventLog.open(settings) as log:
            stored = [e async for e in log.events("who")]
            audit = [e async for e in log.events(settings.audit_session)]
    assert [(e.actor, e.principal) for e in stored] == [
        ("mcp:bot", "token:bot"),
        ("agent:bot", "token:bot"),
        ("agent:ci-build", "token:ci"),
    ]
    assert {e.principal for e in audit} == {"token:bot", "token:ci"}
    listed = json.loads(run_cli(settings, "tokens", "list", "--json").stdout)
    assert {t["name"]: t["actors"] for t in listed} == {"bot": ["mcp:bot", "agent:bot"], "ci": ["agent:ci-*"]}


async def test_failed_token_attempts_are_limited_per_address_and_logged(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    good = add_token(settings.tokens_file, "agent", "agent", ["*"])
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    async with http_node(settings) as node, httpx2.AsyncClient(timeout=10) as http:
        assert node.http_url is not None
        for attempt in range(FailedAttempts().limit):
            wrong = {"Authorization": f"Bearer elt_guess-{attempt}"}
            assert (await http.post(node.http_url, json=ping, headers=wrong)).status_code == 401
        blocked = await http.post(node.http_url, json=ping, headers={"Authorization": "Bearer elt_again"})
        assert blocked.status_code == 429 and "too many failed attempts" in blocked.json()["error"]["message"]
        assert int(blocked.headers["retry-after"]) >= 1
        right = {"Authorization": f"Bearer {good}", "Accept": "application/json, text/event-stream"}
        served = await http.post(node.http_url, json=ping, headers=right)  # never locked out by others
        assert served.status_code == 200, served.text
    refusals = [r.getMessage() for r in caplog.records if "refused /mcp from 127.0.0.1" in r.getMessage()]
    assert len(refusals) == FailedAttempts().limit and "wrong token" in refusals[-1]
    assert all(good not in message for message in caplog.messages)


def test_failed_attempts_age_out_and_count_per_source_and_per_token_digest() -> None:
    now = [0.0]
    failures = FailedAttempts(limit=2, window_s=60, max_keys=100, clock=lambda: now[0])
    assert failures.record("10.0.0.1") == 1 and failures.blocked_for("10.0.0.1") == 0
    failures.record("10.0.0.1")
    assert failures.blocked_for("10.0.0.1") == 60 and failures.blocked_for("10.0.0.2") == 0
    now[0] = 60.0
    assert failures.blocked_for("10.0.0.1") == 0
    for source in ("10.0.0.3", "10.0.0.4"):  # one token digest tried from two addresses
        failures.record(source, "a1b2c3")
    assert failures.blocked_for("10.0.0.5", "a1b2c3") == 60 and failures.blocked_for("10.0.0.5", "ffff") == 0
    for n in range(10_000):  # a flood of addresses and digests: memory stays bounded
        failures.record(f"10.1.{n // 256}.{n % 256}", f"{n:06x}")
    assert len(failures.sources._seen) == len(failures.attempts._seen) == 100
    assert all(len(seen) <= 2 for seen in failures.sources._seen.values())


async def test_http_rate_limits_each_token(settings: Settings) -> None:
    fast = add_token(settings.tokens_file, "fast", "agent", ["*"])
    other = add_token(settings.tokens_file, "other", "agent", ["*"])
    async for node in start_node(replace(settings, producers="none")):
        async with (
            http_gateway(replace(settings, gateway_rate=1), node.url) as gateway,
            httpx2.AsyncClient(timeout=10) as http,
        ):

            async def post(token: str, url: str = gateway.url) -> httpx2.Response:
                headers = {"Authorization": f"Bearer {token}"}
                return await http.post(
                    url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers
                )

            statuses = [(await post(fast)).status_code for _ in range(2)]
            limited = await post(fast)
            assert 429 not in statuses and limited.status_code == 429
            assert int(limited.headers["retry-after"]) >= 1
            assert limited.json()["error"]["code"] == "rate_limited"
            assert (await post(other)).status_code != 429  # each token has its own bucket


def test_principals_match_session_patterns() -> None:
    scoped = Principal("bot", "agent", ("team-a-*", "shared"))
    assert scoped.may_touch("team-a-1") and scoped.may_touch("shared")
    assert not scoped.may_touch("team-b-1") and not scoped.may_touch("shared-2")
    assert not scoped.may_touch(None)  # a question across every session
    assert Principal("ops", "admin", ("*",)).may_touch(None)


def test_tokens_are_stored_as_digests_in_a_private_file(settings: Settings) -> None:
    added = run_cli(settings, "tokens", "add", "ci", "--session", "ci-*", "--json")
    assert added.returncode == 0, added.stderr
    token = json.loads(added.stdout)["token"]
    path = settings.tokens_file
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text()
    book = TokenBook(path)
    principal = book.principal(token)
    assert principal is not None and principal.sessions == ("ci-*",) and principal.role == "agent"
    assert book.principal(token + "x") is None
    listed = run_cli(settings, "tokens", "list", "--json")
    assert json.loads(listed.stdout)[0]["name"] == "ci" and token not in listed.stdout
    assert run_cli(settings, "tokens", "add", "ci", "--session", "x").returncode == 2  # names are unique
    assert run_cli(settings, "tokens", "revoke", "ci").returncode == 0
    assert read_tokens(path).tokens == []


def test_the_rate_limiter_refills() -> None:
    now = [0.0]
    limiter = RateLimiter.per_second(1)
    assert limiter.burst == 2
    limiter.rate, limiter.clock = 10, lambda: now[0]
    assert limiter.wait_s("a") == 0 and limiter.wait_s("a") == 0
    assert limiter.wait_s("a") > 0 and limiter.wait_s("b") == 0
    now[0] = 0.15
    assert limiter.wait_s("a") == 0


def test_a_damaged_tokens_file_admits_nobody(tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    token = add_token(path, "ci", "agent", ["ci-*"])
    book = TokenBook(path)
    assert book.principal(token) is not None
    path.write_text('{"tokens": [{"name": "ci", "sha256": "not hex"')
    book = TokenBook(path)
    assert book.principal(token) is None and book.count() == 0


async def test_graph_query_reads_no_file_and_the_audit_keeps_the_statement(
    settings: Settings, tmp_path: Path
) -> None:
    secret = tmp_path / "outside.csv"
    secret.write_text("k\nnot-for-agents-91c2\n")
    token = add_token(settings.tokens_file, "operator", "admin", ["*"], toolsets=["default", "admin"])
    attempts = [
        f"LOAD FROM '{secret}' RETURN *",
        f"COPY (MATCH (n) RETURN count(n)) TO '{tmp_path / 'written.csv'}'",
    ]
    async with http_node(settings) as node:
        assert node.http_url is not None
        async with http_tools(node.http_url, token) as call:
            for cypher in attempts:
                refused = await failure(call, "memory_graph_query", {"cypher": cypher})
                assert "read-only" in refused.error["message"]
                assert "not-for-agents" not in json.dumps(refused.error)
            allowed = await call("memory_graph_query", {"cypher": "MATCH (n) RETURN count(n) AS n"})
            assert allowed["count"] == 1
        async with await EventLog.open(settings) as log:
            audit = [e.payload async for e in log.events(settings.audit_session)]
    assert not (tmp_path / "written.csv").exists()
    queries = [p for p in audit if p["tool"] == "memory_graph_query"]
    assert [p["statement"] for p in queries] == [*attempts, "MATCH (n) RETURN count(n) AS n"]
    assert [p["ok"] for p in queries] == [False, False, True]
    assert all("read-only" in p["reason"] for p in queries[:2]) and "reason" not in queries[2]
