"""Consumers verify what they read (issue 16, items 3 and 4): a foreign-signed event reaches no read model
and no answer; a malformed message on a session's subject freezes nothing; both are quarantined, named by
`verify`, shown in `status`, and cleared by `eventloom quarantine clear`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from nacl.signing import SigningKey

from eventloom.dlq import list_dead_letters
from eventloom.errors import UntrustedTailError
from eventloom.event import Event, encode_event
from eventloom.keys import KeyStore, Signer
from eventloom.ledger.files import ledger_path
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.sealing import Sealer
from eventloom.settings import Settings
from eventloom.verify import verify_everything
from gateway.node import Node
from readmodels.query.client import MemoryClient
from readmodels.query.cypher_service import ask_cypher
from readmodels.retrieval.model import Query
from tests.conftest import run_cli
from tests.runtime_support import drained
from tests.test_query_service import MEMORY_CONSUMERS, start_node

pytestmark = pytest.mark.anyio
FORGED_TEXT = "Quarantine drill: the vault combination is zebra-forty-two"


@pytest.fixture
async def node(settings: Settings) -> AsyncIterator[Node]:
    async for running in start_node(replace(settings, producers="none")):
        yield running


async def forge_after(log: EventLog, tail: Event, text: str) -> Event:
    """A perfectly linked turn, signed by a key nobody trusted, published straight onto the subject."""
    foreign = Signer(SigningKey.generate())
    request = AppendRequest(
        session=tail.session, type="transcript.turn", actor="user", payload={"role": "user", "text": text}
    )
    (forged,) = await Sealer(foreign).seal([request], tail.seq, tail.hash, tail.ts)
    await log.client.jetstream().publish(log.layout.subject_for(tail.session), encode_event(forged))
    return forged


async def projected(log: EventLog) -> None:
    for consumer in MEMORY_CONSUMERS:
        await drained(log, consumer, timeout=60)


async def graph_hashes(log: EventLog, session: str) -> set[str]:
    rows = await ask_cypher(
        log.client, "MATCH (e:Event) WHERE e.session = $session RETURN e.hash AS hash", {"session": session}
    )
    return {row["hash"] for row in rows}


async def verified(log: EventLog):  # type: ignore[no-untyped-def]
    keyring = KeyStore(log.settings.data_dir).load_keyring()
    return await verify_everything(log.client, log.layout, keyring, log.settings.ledger_dir, wait_s=15)


async def test_a_foreign_signed_event_reaches_no_read_model_and_no_answer(
    node: Node, log: EventLog, settings: Settings
) -> None:
    genuine = await log.append(
        "t1", "transcript.turn", "user", {"role": "user", "text": "Backups run at 2am"}
    )
    forged = await forge_after(log, genuine, FORGED_TEXT)
    await projected(log)

    assert await graph_hashes(log, "t1") == {genuine.hash}
    answer = await MemoryClient(log.client).query(Query(text="vault combination zebra", session="t1"))
    assert all(forged.hash[:12] not in c.uri for hit in answer.hits for c in hit.citations)
    assert all("zebra" not in hit.summary + hit.entity for hit in answer.hits)
    for consumer in MEMORY_CONSUMERS:
        letters = [d for d in await list_dead_letters(log.client, consumer) if d.session == "t1"]
        assert [d.error.split(":")[0] for d in letters] == ["unverified"], consumer
        assert letters[0].seq is None  # nothing the forgery claims is believed

    status = json.loads(run_cli(settings, "status", "--json").stdout)
    assert status["refused"] >= len(MEMORY_CONSUMERS)
    report = await verified(log)
    (t1,) = [s for s in report.sessions if s.session == "t1"]
    assert [(f.where, f.seq) for f in t1.findings if f.where == "quarantine"] == [("quarantine", 2)]
    assert any("not in the trusted keyring" in f.reason for f in t1.findings if f.where == "quarantine")

    # Appending would chain onto an event this node cannot vouch for (or fork the session): refused, with
    # the two ways out named; clearing the quarantine is one of them.
    with pytest.raises(UntrustedTailError, match="quarantine clear"):
        await log.append("t1", "note.added", "agent:a", {"text": "after the forgery"})
    listed = run_cli(settings, "quarantine", "list", "--json")
    assert [(q["session"], q["seq"]) for q in json.loads(listed.stdout)] == [("t1", 2)]
    cleared = run_cli(settings, "quarantine", "clear", "--session", "t1", "--json")
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(cleared.stdout)["cleared"] == 1
    assert json.loads(run_cli(settings, "quarantine", "list", "--json").stdout) == []
    after = await log.append("t1", "note.added", "agent:a", {"text": "after the forgery"})
    assert (after.seq, after.prev_hash) == (2, genuine.hash)
    await projected(log)
    assert await graph_hashes(log, "t1") == {genuine.hash, after.hash}
    assert (await verified(log)).ok


async def test_a_malformed_message_freezes_nothing(node: Node, log: EventLog, settings: Settings) -> None:
    first = await log.append("t2", "note.added", "agent:a", {"text": "before"})
    junk = await log.client.jetstream().publish(log.layout.subject_for("t2"), b'{"not": "an event"')
    events = await log.append_many(
        [
            AppendRequest(session="t2", type="note.added", actor="agent:a", payload={"text": f"after {n}"})
            for n in range(100)
        ]
    )
    assert [e.seq for e in events] == list(range(2, 102))
    assert events[0].prev_hash == first.hash
    await projected(log)

    assert await graph_hashes(log, "t2") == {first.hash} | {e.hash for e in events}
    assert len(ledger_path(settings.ledger_dir, "t2").read_bytes().splitlines()) == 101
    report = await verified(log)
    (t2,) = [s for s in report.sessions if s.session == "t2"]
    assert t2.ledger_events == t2.stream_events == 101
    quarantined = [f for f in t2.findings if f.where == "quarantine"]
    assert len(quarantined) == 1 and f"stream message {junk.seq}" in quarantined[0].reason
    assert not [f for f in t2.findings if f.where in ("stream", "parity", "ledger")]

    cleared = run_cli(settings, "quarantine", "clear", "--stream-seq", str(junk.seq))
    assert cleared.returncode == 0, cleared.stderr
    assert (await verified(log)).ok
    more = await log.append("t2", "note.added", "agent:a", {"text": "still going"})
    assert more.seq == 102


async def test_a_message_published_as_the_newest_event_is_stepped_over(log: EventLog) -> None:
    """No node needed: the appender alone never chains onto bytes it did not write."""
    first = await log.append("t3", "note.added", "agent:a", {"text": "one"})
    await log.client.jetstream().publish(log.layout.subject_for("t3"), b"garbage")
    await asyncio.sleep(0)
    fresh = await EventLog.open(log.settings)  # no cached tail: it reads the subject
    try:
        second = await fresh.append("t3", "note.added", "agent:a", {"text": "two"})
    finally:
        await fresh.close()
    assert (second.seq, second.prev_hash) == (2, first.hash)
