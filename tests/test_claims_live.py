"""The claims pack live, and in memory search.

Memory search (real LadybugDB graph, SQLite keyword and vector models, the pack's extractors found
through their entry point): an observation reads as what was seen, a claim as a claim (who, how sure, on
what basis), in the checkout's not-authoritative section, never among the facts; a settled claim is no
longer true.

Live (one real node running the `claims` projector and the contradiction producer): observe, claim, a
conflicting claim -> the producer's contradiction in `contradictions`; resolve -> `about` leaves the
settled claim out and the contradiction closes; `basis` chains down to observations; `eventloom rebuild
claims` answers the same; the CLI's `--json`; the MCP tools with a session-scoped token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.access.tokens import Principal
from gateway.cli import app
from gateway.node import Node
from gateway.packs.claims import ClaimsClient
from gateway.packs.claims.model import event_key
from readmodels.checkout.assemble import assemble_context
from readmodels.checkout.model import CheckoutRequest
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.query.local import LocalMemory
from readmodels.query.protocol import MemoryUnavailableError
from tests.conftest import cli_env, run_cli
from tests.mcp_support import failure
from tests.retrieval_support import story_models
from tests.test_graph_support import SessionLog
from tests.test_workflow_mcp import tools

pytestmark = pytest.mark.anyio
AGENT = "agent:x"


def source(event: Event) -> dict[str, object]:
    return {"session": event.session, "seq": event.seq, "hash": event.hash}


def claim_payload(obj: str, confidence: float, basis: list[Event], **more: Any) -> dict[str, Any]:
    return {
        "subject": "Alice",
        "predicate": "LIVES_IN",
        "object": obj,
        "confidence": confidence,
        "source_agent": AGENT,
        "basis": [source(e) for e in basis],
        **more,
    }


async def test_memory_search_shows_a_claim_as_a_claim_and_a_settled_one_as_no_longer_true(
    tmp_path: Path,
) -> None:
    log = SessionLog("mem")
    seen = log.add(
        "claims.observation.recorded",
        {"content": "Alice mentioned her flat in Lyon and her office in Paris.", "source": "chat"},
    )
    london = log.add("claims.claim.asserted", claim_payload("London", 0.4, [seen]), actor=AGENT)
    log.add(
        "claims.claim.resolved",
        claim_payload("Lyon", 0.8, [seen], supersedes=[source(london)], reason="she said Lyon"),
        actor=AGENT,
    )
    async with (
        LadybugGraphStore(tmp_path / "graph.lbug") as graph,
        story_models(graph, tmp_path, log.events) as models,
    ):
        memory = LocalMemory(models.models, lambda: models.inferred)
        bundle = await assemble_context(
            memory, CheckoutRequest(text="where does Alice live", token_budget=3000)
        )
    prompt = bundle.prompt
    facts_at, gone_at = prompt.index("## Facts"), prompt.index("## No longer true")
    proposed_at = prompt.index("## Proposed, inferred and causal")
    facts = prompt[facts_at : prompt.index("##", facts_at + 2)]
    assert "observation from chat at" in facts and "LIVES_IN" not in facts  # what was seen, no claim
    claimed = f"- CLAIMED by {AGENT} (confidence 0.80) [claimed] mem/3 (claim): resolution (confidence 0.80"
    assert claimed in prompt[proposed_at:], prompt
    assert "basis: 1 event): Alice LIVES_IN Lyon; settles mem/2" in prompt[proposed_at:]
    assert "mem/2 (claim) stopped holding" in prompt[gone_at:proposed_at]
    assert "resolution mem/3 by agent:x settles mem/2: Alice LIVES_IN Lyon" in prompt[gone_at:proposed_at]
    assert [p.about for p in bundle.inferred if p.kind == "proposed"] == ["mem/3"]


@contextlib.asynccontextmanager
async def claims_node(settings: Settings, log: EventLog) -> AsyncIterator[ClaimsClient]:
    """A node that runs the claims projector and the contradiction producer, once it answers."""
    node = Node(replace(settings, projectors="claims", producers="claims_contradictions"))
    stop = asyncio.Event()
    task = asyncio.create_task(node.run(stop))
    await asyncio.wait_for(node.ready.wait(), 30)
    client = ClaimsClient(log)
    try:
        await until(lambda: client.about("nobody"), lambda found: True)
        yield client
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)


async def until(ask: Any, holds: Any, timeout: float = 30) -> Any:
    """`await ask()` until `holds(answer)` (the projector and the producer catch up in the background)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            answer = await ask()
            if holds(answer):
                return answer
        except MemoryUnavailableError:
            pass
        assert asyncio.get_running_loop().time() < deadline, "the claims model never caught up"
        await asyncio.sleep(0.1)


def key_of(citation: str) -> str:
    session, rest = citation.removeprefix("eventloom://").split("/events/")
    return event_key(session, int(rest.split("#")[0]))


def plain(value: Any) -> Any:
    return msgspec.to_builtins(value)


async def answers(claims: ClaimsClient, key: str) -> dict[str, Any]:
    return {
        "about": plain(await claims.about("alice")),
        "all": plain(await claims.about("Alice", include_superseded=True)),
        "contradictions": plain(await claims.contradictions()),
        "basis": plain(await claims.basis(key)),
        "observations": plain(await claims.observations("Paris")),
        "entity": plain(await claims.entity("Alice")),
    }


async def test_claims_contradictions_resolution_basis_rebuild_cli_and_mcp(
    settings: Settings, log: EventLog
) -> None:
    async with claims_node(settings, log) as claims:
        seen = await claims.observe("Alice lives in Paris. Alice works at Acme.", source="chat", session="c1")
        paris = await claims.claim(
            "Alice", "lives in", "Paris", confidence=0.7, basis=[seen], agent=AGENT, session="c1"
        )
        on_claim = await claims.claim(
            "Alice", "works at", "Acme", confidence=0.6, basis=[seen, paris], agent=AGENT, session="c1"
        )
        london = await claims.claim(
            "alice", "LIVES_IN", "London", confidence=0.5, basis=[seen], agent="agent:y", session="c2"
        )
        [open_pair] = await until(claims.contradictions, lambda found: len(found) == 1)
        assert {open_pair.first.key, open_pair.second.key} == {"c1/2", "c2/1"}
        assert open_pair.trust == 0.5 and open_pair.method == "claims.contradiction"

        chain = await claims.basis(on_claim)
        assert chain is not None and chain.root.key == "c1/3"
        assert [c.key for c in chain.claims] == ["c1/2"] and [o.key for o in chain.observations] == ["c1/1"]

        settled = await claims.resolve(
            "Alice", "lives in", "Paris", confidence=0.9, basis=[seen], supersedes=[london], agent=AGENT,
            session="c2", reason="she said Paris twice",
        )  # fmt: skip
        resolution = key_of(settled)  # c2/3: the contradiction went in c2 after London
        about = await until(lambda: claims.about("Alice"), lambda found: resolution in {c.key for c in found})
        assert [c.key for c in about] == [resolution, "c1/2", "c1/3"]  # confidence first; London settled
        assert await until(claims.contradictions, lambda found: found == []) == []
        before = await answers(claims, "c1/3")

        rebuilt = await asyncio.to_thread(run_cli, settings, "rebuild", "claims", "--json")
        assert rebuilt.returncode == 0, rebuilt.stderr
        after = await until(lambda: answers(claims, "c1/3"), lambda found: found == before)
        assert after == before

        await check_cli(settings, seen, resolution)
        await check_mcp(log, claims)


async def check_cli(settings: Settings, seen: str, resolution: str) -> None:
    env = cli_env(settings)

    async def cli(*args: str) -> Any:
        return await asyncio.to_thread(CliRunner().invoke, app, ["claims", *args], env=env)

    shown = await cli("about", "Alice", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert [c["key"] for c in json.loads(shown.stdout)] == [resolution, "c1/2", "c1/3"]
    made = await cli(
        "claim", "Alice", "knows", "Bob", "--confidence", "0.3", "--basis", seen, "--agent", AGENT,
        "--session", "c3", "--json",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    assert json.loads(made.stdout)["key"] == "c3/1"
    refused = await cli(
        "claim", "Alice", "knows", "Carol", "--confidence", "0.3", "--basis", "c1/99", "--agent", AGENT,
        "--session", "c3",
    )  # fmt: skip
    assert refused.exit_code == 2 and "basis[0]" in refused.stderr
    text = await cli("basis", "c1/3")
    assert text.exit_code == 0, text.stderr
    assert f"claim c1/3 (confidence 0.60, by {AGENT}, basis: 2 events): Alice WORKS_AT Acme" in text.stdout
    assert "observation c1/1 seen at chat" in text.stdout


async def check_mcp(log: EventLog, claims: ClaimsClient) -> None:
    """A token limited to sessions c1 and c4: claims as itself, cites only what it may touch, reads only
    what it may see, and may not accept without review rights."""
    limited = Principal("claimer", "agent", ("c1", "c4"))
    async with tools(log, limited) as call:
        seen = await call(
            "claims_observe", {"session": "c4", "content": "Alice moved to Berlin.", "source": "mail"}
        )
        said = await call(
            "claims_claim",
            {"session": "c4", "subject": "Alice", "predicate": "lives in", "object": "Berlin",
             "confidence": 0.95, "basis": [seen["citation"]]},
        )  # fmt: skip
        assert said["key"] == "c4/2"
        forbidden = await failure(
            call,
            "claims_claim",
            {"session": "c4", "subject": "Alice", "predicate": "lives in", "object": "Rome",
             "confidence": 0.5, "basis": ["c2/1"]},
        )  # fmt: skip
        assert forbidden.error["code"] == "forbidden" and "basis[0]" in forbidden.error["message"]
        refused = await failure(call, "claims_accept", {"session": "c4", "claim": said["key"]})
        assert refused.error["code"] == "forbidden"
        across = await call("claims_contradictions", {})  # no session: the rows the token may see
        assert '"c2/' not in json.dumps(across) and "eventloom://c2/" not in json.dumps(across)
        mine = await until(
            lambda: call("claims_about", {"entity": "Alice", "session": "c4"}),
            lambda found: [c["key"] for c in found["claims"]] == ["c4/2"],
        )
        assert mine["claims"][0]["source_agent"] == "mcp:claimer"
        visible = await call("claims_about", {"entity": "Alice", "session": "c1"})
        assert [c["key"] for c in visible["claims"]] == ["c1/2", "c1/3"]  # not c2's, though asked of all
        opened = await until(  # Berlin against Paris (c1/2); the one against c2's resolution is not visible
            lambda: call("claims_contradictions", {"entity": "Alice", "session": "c4"}),
            lambda found: len(found["contradictions"]) == 1,
        )
        [pair] = opened["contradictions"]
        assert {pair["first"]["key"], pair["second"]["key"]} == {"c4/2", "c1/2"} and pair["session"] == "c4"
        # what an unrestricted reader sees: the second edge may still be on its way from the producer
        everything = await until(lambda: claims.contradictions("Alice"), lambda found: len(found) == 2)
        assert len(everything) == 2
        chain = await call("claims_basis", {"claim": "c1/3", "session": "c1"})
        assert chain["chain"]["root"]["key"] == "c1/3" and chain["withheld"] == 0
