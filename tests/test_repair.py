"""`eventloom repair` on a real nats-server: a lost tail restored, a content disagreement and a hole refused,
and the whole stream rebuilt from the ledger."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from eventloom.bus.consumer import read_stream
from eventloom.bus.stream import ensure_stream
from eventloom.event import encode_event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.repair import RepairReport, apply_repair, plan_repair
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from tests.conftest import NatsServer, run_cli
from tests.test_ledger import append_story, caught_up, full_verify, running_mirror

pytestmark = pytest.mark.anyio
WINDOW_S = 1.0  # a short duplicate window: a deleted message's id is forgotten within the test


@pytest.fixture
def settings(tmp_path: Path, nats_server: NatsServer) -> Settings:
    return Settings(data_dir=tmp_path / "data", nats_url=nats_server.url, duplicate_window_s=WINDOW_S)


async def stream_messages(log: EventLog, session: str) -> list[tuple[int, bytes]]:
    subject = log.layout.subject_for(session)
    return [
        (m.metadata.sequence.stream, m.data)
        async for m in read_stream(log.client, log.layout.name, [subject])
    ]


async def delete_from_stream(log: EventLog, session: str, seqs: list[int]) -> None:
    """Make the stream lose these event seqs of `session`. Eventloom's stream denies message deletes, so
    the subject is purged and the events it keeps are published back as they were, after the duplicate
    window has forgotten their ids."""
    kept = [
        data for index, (_, data) in enumerate(await stream_messages(log, session)) if index + 1 not in seqs
    ]
    await log.client.jetstream().purge_stream(log.layout.name, subject=log.layout.subject_for(session))
    await asyncio.sleep(WINDOW_S + 0.2)
    for data in kept:
        await log.client.jetstream().publish(log.layout.subject_for(session), data)
    await asyncio.sleep(WINDOW_S + 0.2)


def ledger_bytes(settings: Settings) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(settings.ledger_dir.glob("*.jsonl"))}


async def plan(log: EventLog) -> RepairReport:
    keyring = KeyStore(log.settings.data_dir).load_keyring()
    return await plan_repair(log.client, log.layout, keyring, log.settings.ledger_dir)


async def test_a_lost_tail_is_reported_then_restored_with_its_original_bytes(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        events = await append_story(log, sessions=2, per_session=10)
        await caught_up(log)
        before = ledger_bytes(settings)
        await delete_from_stream(log, "s0", [8, 9, 10])

        report = run_cli(settings, "repair", "--json")
        assert report.returncode == 1, report.stderr
        sessions = {s["session"]: s for s in json.loads(report.stdout)["sessions"]}
        assert sessions["s1"]["status"] == "ok"
        s0 = sessions["s0"]
        assert (s0["status"], s0["missing_from"], s0["missing_to"], s0["stream_seq"]) == (
            "repairable",
            8,
            10,
            7,
        )
        assert len(await stream_messages(log, "s0")) == 7  # a report publishes nothing

        applied = run_cli(settings, "repair", "--apply", "--json")
        assert applied.returncode == 0, applied.stderr
        result = {s["session"]: s for s in json.loads(applied.stdout)["sessions"]}
        assert (result["s0"]["status"], result["s0"]["republished"]) == ("repaired", 3)
        assert [data for _, data in await stream_messages(log, "s0")] == [
            encode_event(e) for e in events if e.session == "s0"
        ]
        await caught_up(log)
    assert ledger_bytes(settings) == before  # the mirror skipped the re-published events
    verified = await full_verify(log)
    assert verified.ok, verified
    again = run_cli(settings, "repair")
    assert again.returncode == 0 and "ledger and stream agree" in again.stdout, again.stderr


async def test_a_content_disagreement_and_a_hole_are_refused_with_nothing_published(log: EventLog) -> None:
    async with running_mirror(log):
        originals = await append_story(log, sessions=2, per_session=5)
        await caught_up(log)
    await delete_from_stream(log, "s0", [4, 5])
    rewritten = await log.append_many([_request("s0", n) for n in range(2)])  # seqs 4 and 5, other content
    await delete_from_stream(log, "s1", [2])
    before = {s: await stream_messages(log, s) for s in ("s0", "s1")}

    report = await apply_repair(log.client, log.layout, log.settings.ledger_dir, await plan(log))

    assert not report.ok
    by_session = {s.session: s for s in report.sessions}
    conflict = by_session["s0"].conflict
    assert by_session["s0"].status == "refused" and conflict is not None
    ledger_s0 = [e for e in originals if e.session == "s0"]
    assert (conflict.seq, conflict.ledger_hash, conflict.stream_hash) == (
        4,
        ledger_s0[3].hash,
        rewritten[0].hash,
    )
    hole = by_session["s1"]
    assert hole.status == "refused" and hole.reason is not None and "hole in the middle" in hole.reason
    assert hole.advice is not None and "purge" in hole.advice
    assert {s: await stream_messages(log, s) for s in ("s0", "s1")} == before


async def test_a_ledger_that_does_not_verify_is_never_published_from(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        await append_story(log, sessions=2, per_session=6)
        await caught_up(log)
    await delete_from_stream(log, "s0", [5, 6])
    path = settings.ledger_dir / "s0.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[5] = lines[5].replace(b'"n":', b'"n":1', 1)  # a forged payload: the hash no longer matches
    path.write_bytes(b"".join(lines))
    before = await stream_messages(log, "s0")

    applied = run_cli(settings, "repair", "--apply", "--json")

    assert applied.returncode == 1, applied.stderr
    s0 = next(s for s in json.loads(applied.stdout)["sessions"] if s["session"] == "s0")
    assert s0["status"] == "refused" and "does not verify" in s0["reason"]
    assert "verify --ledger-only" in s0["advice"]
    assert await stream_messages(log, "s0") == before


async def test_a_stream_lost_whole_is_rebuilt_in_order_from_the_ledger(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        events = await append_story(log, sessions=3, per_session=8)
        await caught_up(log)
    before = ledger_bytes(settings)
    await log.client.jetstream().delete_stream(log.layout.name)
    layout = await ensure_stream(log.client, settings)
    assert layout == log.layout

    progressed: list[int] = []
    report = await apply_repair(
        log.client, layout, settings.ledger_dir, await plan(log), progress=progressed.append
    )

    assert report.ok and sum(progressed) == len(events) == sum(s.republished for s in report.sessions)
    for session in ("s0", "s1", "s2"):
        expected = [encode_event(e) for e in events if e.session == session]
        assert [data for _, data in await stream_messages(log, session)] == expected
    async with running_mirror(log):
        await caught_up(log)
    assert ledger_bytes(settings) == before
    verified = await full_verify(log)
    assert verified.ok, verified


def _request(session: str, n: int) -> AppendRequest:
    return AppendRequest(session=session, type="note.added", actor="tester", payload={"n": 100 + n})
