"""A causal edge must cite real events (issue 20, item 1), with real NATS: refused at append when it cites
none; refused into the dead-letter queue ("uncited: ...") by the graph projector when it cites an event that
does not exist or has another hash; a legacy edge already in the log stays readable and is projected when
its citations hold. A rebuild (from the stream or from the ledger) refuses exactly what the live projector
refused, so it equals the live projection."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from eventloom.dlq import list_dead_letters
from eventloom.errors import EventValidationError
from eventloom.event import Event, encode_event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.schemas import decode_payload
from eventloom.schemas.catalogue import CausalEdgeGeneratedV1
from eventloom.sealing import Sealer
from eventloom.settings import Settings
from eventloom.verify import verify_everything
from projectors.graph.projector import GraphProjector
from projectors.graph.rebuild_neo4j import rebuild_neo4j_from_ledger, rebuild_neo4j_from_stream
from readmodels.embedded.graph_store import LadybugGraphStore
from readmodels.graph.protocol import GraphStore
from readmodels.neo4j.graph_store import Neo4jGraphStore
from tests.conftest import run_cli
from tests.runtime_support import FAST, drained, running
from tests.test_graph_support import dump
from tests.test_ledger import caught_up, running_mirror

pytestmark = pytest.mark.anyio
SESSION = "cites"


def edge(cause: str, **fields: Any) -> dict[str, Any]:
    return {
        "cause": cause,
        "effect": "login errors",
        "taxonomy": "caused",
        "relation_type": "causal_caused",
        "confidence": 0.7,
        "method": "test",
        **fields,
    }


def cites(seq: int, event_hash: str, session: str | None = None) -> list[dict[str, Any]]:
    return [{"event_seq": seq, "event_hash": event_hash, **({"session": session} if session else {})}]


async def publish_legacy(log: EventLog, tail: Event, payload: dict[str, Any]) -> Event:
    """An event appended before payload version 2 existed: sealed by this node's key, chained after
    `tail`, published as the appender would, without today's validation."""
    request = AppendRequest(session=SESSION, type="causal.edge.generated", actor="agent:old", payload=payload)
    signer = KeyStore(log.settings.data_dir).active_signer()
    (event,) = await Sealer(signer).seal([request], tail.seq, tail.hash, tail.ts)
    subject = log.layout.subject_for(SESSION)
    await log.client.jetstream().publish(subject, encode_event(event), headers={"Nats-Msg-Id": event.hash})
    return event


async def uncited_story(log: EventLog) -> dict[str, Event]:
    with pytest.raises(EventValidationError) as caught:
        await log.append(SESSION, "causal.edge.generated", "agent:a", edge("no citation"))
    assert caught.value.field == "payload.evidence"
    decision = await log.append(SESSION, "decision.made", "agent:a", {"decision_id": "d1", "title": "Ship"})
    story = {"decision": decision}
    for name, evidence in (
        ("good", cites(decision.seq, decision.hash)),
        ("missing", cites(1, decision.hash, session="ghost")),
        ("wrong", cites(decision.seq, "f" * 64)),
    ):
        story[name] = await log.append(
            SESSION, "causal.edge.generated", "agent:a", edge(name, evidence=evidence)
        )
    story["legacy"] = await publish_legacy(
        log, story["wrong"], edge("legacy", evidence=cites(1, decision.hash))
    )
    bare = edge("legacy bare", source_event_seq=decision.seq, source_event_hash=decision.hash)
    story["bare"] = await publish_legacy(log, story["legacy"], bare)
    assert isinstance(decode_payload("causal.edge.generated", bare), CausalEdgeGeneratedV1)
    return story


async def projected_causes(store: GraphStore) -> set[str]:
    return {e.source_name for e in await store.relations(SESSION, relation_type="causal_caused")}


async def refusals(log: EventLog, consumer: str) -> list[str]:
    """The dead letters of `consumer` on the session's subject, in stream order (a refused event's seq is
    not believed, so letters are told apart by stream sequence)."""
    subject = log.layout.subject_for(SESSION)
    letters = [d for d in await list_dead_letters(log.client, consumer) if d.subject == subject]
    return [d.error for d in sorted(letters, key=lambda d: d.stream_seq)]


async def test_the_graph_projector_refuses_edges_citing_nothing_real(
    log: EventLog, settings: Settings
) -> None:
    story = await uncited_story(log)
    store = LadybugGraphStore(settings.data_dir / "cites" / "graph.lbug")
    async with running(log, GraphProjector(store)) as runner:
        await drained(log, runner.consumer)
        assert await projected_causes(store) == {"good", "legacy"}
        refused = await refusals(log, runner.consumer)
    missing, wrong, bare = refused
    assert all(reason.startswith("uncited: ") for reason in refused)
    assert "session ghost has no event 1" in missing
    assert f"has hash {story['decision'].hash[:12]}, not ffffffffffff" in wrong
    assert "cites none" in bare

    tail = await asyncio.to_thread(run_cli, settings, "tail", "--session", SESSION, "--json")
    assert tail.returncode == 0, tail.stderr
    printed = [json.loads(line) for line in tail.stdout.splitlines() if line.strip()]
    assert [e["seq"] for e in printed][-2:] == [story["legacy"].seq, story["bare"].seq]


async def test_events_after_a_refused_one_are_applied_even_one_batch_at_a_time(
    log: EventLog, settings: Settings
) -> None:
    """An event refused for its citations is genuine: the session goes on past it, in any batching."""
    story = await uncited_story(log)
    after = await log.append(SESSION, "decision.made", "agent:a", {"decision_id": "d2", "title": "Later"})
    store = LadybugGraphStore(settings.data_dir / "one-by-one" / "graph.lbug")
    one_at_a_time = dataclasses.replace(FAST, batch=1)
    projector = GraphProjector(store)
    async with running(log, projector, options=one_at_a_time) as runner:
        await drained(log, runner.consumer)
        assert await projected_causes(store) == {"good", "legacy"}
        assert (await projector.applied_seqs([SESSION]))[SESSION] == after.seq
        assert story["decision"].seq < after.seq


async def test_a_rebuild_refuses_what_the_live_projector_refused(
    log: EventLog, settings: Settings, neo4j_endpoint: Any
) -> None:
    """On Neo4j: rebuilt from the stream (through the verifying runner) and from the verified ledger,
    the graph is the same and holds only the edges whose citations hold; the log itself verifies."""
    neo4j = dataclasses.replace(
        settings,
        graph_backend="neo4j",
        embedder="hash",  # the shared test server's vector indexes are as wide as `hash`'s vectors
        neo4j_uri=neo4j_endpoint.uri,
        neo4j_user=neo4j_endpoint.user,
        neo4j_password=neo4j_endpoint.password,
    )
    async with running_mirror(log):
        await uncited_story(log)
        await caught_up(log)
    keyring = KeyStore(settings.data_dir).load_keyring()
    assert (await verify_everything(log.client, log.layout, keyring, settings.ledger_dir, wait_s=15)).ok
    async with Neo4jGraphStore(
        neo4j_endpoint.uri, user=neo4j_endpoint.user, password=neo4j_endpoint.password
    ) as store:
        async with await EventLog.open(neo4j) as neo4j_log:
            streamed = await rebuild_neo4j_from_stream(neo4j_log)
        assert await projected_causes(store) == {"good", "legacy"}
        from_stream = await dump(store, SESSION)
        from_ledger = await rebuild_neo4j_from_ledger(neo4j, settings.ledger_dir, keyring)
        assert from_ledger.refused == 3 and from_ledger.events == streamed.events
        assert await dump(store, SESSION) == from_stream
