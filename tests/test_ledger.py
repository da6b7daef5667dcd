"""The ledger mirror and `verify` on a real nats-server: writes, crash repair, tampering, dead letters."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from nacl.signing import SigningKey

from eventloom import verify as verify_module
from eventloom.bus.consumer import read_stream
from eventloom.chain import ChainTip
from eventloom.dlq import list_dead_letters
from eventloom.errors import UntrustedTailError
from eventloom.event import Event, compute_hash, encode_event
from eventloom.keys import KeyStore, Signer
from eventloom.ledger import mirror as mirror_module
from eventloom.ledger.files import ledger_path, read_incidents, read_tip
from eventloom.ledger.mirror import LedgerMirror
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from eventloom.verify import verify_everything, verify_ledger_dir, wait_for_mirror
from tests.conftest import run_cli
from tests.electing import electing_once

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def running_mirror(log: EventLog) -> AsyncIterator[LedgerMirror]:
    mirror = LedgerMirror(
        log.client, log.layout, KeyStore(log.settings.data_dir), log.settings.ledger_dir, batch=50
    )
    stop = asyncio.Event()
    task = asyncio.create_task(mirror.run(stop))
    try:
        await asyncio.wait_for(mirror.ready.wait(), timeout=15)
        yield mirror
    finally:
        stop.set()
        await task


async def caught_up(log: EventLog) -> None:
    assert await wait_for_mirror(log.client, log.layout, timeout=15)


async def append_story(log: EventLog, sessions: int = 2, per_session: int = 30) -> list[Event]:
    requests = [
        AppendRequest(session=f"s{n % sessions}", type="note.added", actor="tester", payload={"n": n})
        for n in range(sessions * per_session)
    ]
    return await log.append_many(requests)


async def full_verify(log: EventLog):  # type: ignore[no-untyped-def]
    keyring = KeyStore(log.settings.data_dir).load_keyring()
    return await verify_everything(log.client, log.layout, keyring, log.settings.ledger_dir, wait_s=10)


def lines_of(settings: Settings, session: str) -> list[bytes]:
    return ledger_path(settings.ledger_dir, session).read_bytes().splitlines()


async def test_verify_waits_out_a_cluster_electing_a_leader(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 "JetStream system temporarily unavailable" (a failover) while verify reads: asked again, and the
    report is the one a quiet cluster gives, not a traceback."""
    async with running_mirror(log):
        await append_story(log, per_session=5)
        await caught_up(log)
    js, refusals = log.client.jetstream(), [0]
    stream_info = electing_once(js.stream_info, refusals)
    monkeypatch.setattr(type(js), "stream_info", lambda self, *a, **k: stream_info(*a, **k))
    report = await full_verify(log)
    assert refusals == [1] and report.ok, report
    assert {s.session: s.stream_events for s in report.sessions} == {"s0": 5, "s1": 5}


async def test_mirror_writes_every_event_once_and_verify_is_green(log: EventLog, settings: Settings) -> None:
    async with running_mirror(log):
        events = await append_story(log)
        await caught_up(log)
    for session in ("s0", "s1"):
        expected = [encode_event(e) for e in events if e.session == session]
        assert lines_of(settings, session) == expected
    report = await full_verify(log)
    assert report.ok, report
    assert {s.session: (s.ledger_events, s.stream_events) for s in report.sessions} == {
        "s0": (30, 30),
        "s1": (30, 30),
    }


async def test_restarted_mirror_skips_what_it_already_wrote(log: EventLog, settings: Settings) -> None:
    async with running_mirror(log):
        await append_story(log)
        await caught_up(log)
    await log.client.jetstream().delete_consumer(log.layout.name, "ledger-mirror")  # forces full redelivery
    async with running_mirror(log):
        await append_story(log, per_session=5)
        await caught_up(log)
    assert len(lines_of(settings, "s0")) == 35
    assert (await full_verify(log)).ok


async def test_torn_last_line_is_cut_and_refetched_from_the_stream(log: EventLog, settings: Settings) -> None:
    async with running_mirror(log):
        await append_story(log, sessions=1)
        await caught_up(log)
    path = ledger_path(settings.ledger_dir, "s0")
    whole = path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    path.write_bytes(whole[: last_start + 40])  # a crash in the middle of writing the last, acked line
    async with running_mirror(log) as mirror:
        await caught_up(log)
        assert mirror.stats.repaired_bytes == 40
        assert mirror.stats.refetched == 1
    assert path.read_bytes() == whole
    assert (await full_verify(log)).ok


async def test_a_reader_beside_the_mirror_takes_a_line_still_being_written_for_not_there_yet(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        events = await append_story(log, sessions=1)
        await caught_up(log)
    path = ledger_path(settings.ledger_dir, "s0")
    whole = path.read_bytes()
    last_start = whole.rstrip(b"\n").rfind(b"\n") + 1
    before_last = read_tip(path)
    assert before_last == ChainTip(events[-1].seq, events[-1].hash)
    path.write_bytes(whole[: last_start + 40])  # the last line half written, as a reader may see it
    assert read_tip(path) == ChainTip(events[-2].seq, events[-2].hash)
    path.write_bytes(whole[:last_start])
    assert read_tip(path) == ChainTip(events[-2].seq, events[-2].hash)


async def test_a_ledger_that_lost_events_is_reported_then_refilled(log: EventLog, settings: Settings) -> None:
    """Cut the last line of one session's file and delete another's: the signed manifest says what is
    missing; the mirror logs it, records it in incidents.log, refetches it, and `verify` passes again."""
    async with running_mirror(log):
        await append_story(log, sessions=2, per_session=5)
        await caught_up(log)
    keyring = KeyStore(settings.data_dir).load_keyring()
    assert all(r.ok for r in verify_ledger_dir(settings.ledger_dir, keyring))
    cut = ledger_path(settings.ledger_dir, "s0")
    cut.write_bytes(b"".join(line + b"\n" for line in lines_of(settings, "s0")[:-1]))
    ledger_path(settings.ledger_dir, "s1").unlink()
    offline = {
        r.session: [f.reason for f in r.findings] for r in verify_ledger_dir(settings.ledger_dir, keyring)
    }
    assert "the file ends at seq 4; the signed manifest has seq 5" in offline["s0"][0]
    assert "the file is gone" in offline["s1"][0]
    async with running_mirror(log) as mirror:
        await caught_up(log)
        assert len(mirror.stats.incidents) == 2
    incidents = read_incidents(settings.ledger_dir)
    assert [line.split(" ", 1)[1].split(":")[0] for line in incidents] == ["session s0", "session s1"]
    assert len(lines_of(settings, "s0")) == len(lines_of(settings, "s1")) == 5
    assert (await full_verify(log)).ok
    status = json.loads(run_cli(settings, "status", "--json").stdout)
    assert len(status["ledger_incidents"]) == 2


async def test_forged_event_is_dead_lettered_never_written_and_reported(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        events = await append_story(log, sessions=1, per_session=3)
        await caught_up(log)
        forged = forge_successor(events[-1])
        await log.client.jetstream().publish(log.layout.subject_for("s0"), encode_event(forged))
        await caught_up(log)
    assert len(lines_of(settings, "s0")) == 3
    letters = await list_dead_letters(log.client, "ledger-mirror")
    assert [(d.session, d.seq) for d in letters] == [("s0", 4)]
    assert "not in the trusted keyring" in letters[0].error
    report = await full_verify(log)
    assert not report.ok
    (session,) = report.sessions
    assert session.first_broken_seq == 4
    # it is stepped over, not a break of the chain: the stream's own events still verify around it
    assert {f.where for f in session.findings} == {"quarantine", "dead-letter"}


def forge_successor(tip: Event) -> Event:
    """A well-formed next event signed by a key nobody trusts."""
    intruder = Signer(SigningKey.generate())
    unsigned = Event(
        v=1,
        session=tip.session,
        seq=tip.seq + 1,
        ts=tip.ts,
        type="note.added",
        actor="mallory",
        payload={"n": 999},
        caused_by=[],
        prev_hash=tip.hash,
        hash="",
        sig="",
        key_id="",
    )
    digest = compute_hash(unsigned)
    return msgspec.structs.replace(
        unsigned, hash=digest, sig=intruder.sign_hash(digest), key_id=intruder.key_id
    )


def tamper_ledger(settings: Settings, how: str) -> int:
    """Damage the s0 ledger the way an attacker or a bad disk would; returns the seq verify must name."""
    path = ledger_path(settings.ledger_dir, "s0")
    lines = path.read_bytes().splitlines()
    if how == "flipped byte":
        line = bytearray(lines[9])
        at = line.index(b'"n":') + 4
        line[at] ^= 0x01  # a digit becomes another digit: still valid JSON, wrong hash
        lines[9] = bytes(line)
        broken = 10
    elif how == "deleted line":
        del lines[4]
        broken = 5
    elif how == "swapped lines":
        lines[6], lines[7] = lines[7], lines[6]
        broken = 7
    else:  # forged signature
        event = json.loads(lines[2])
        event["sig"] = event["sig"][::-1]
        lines[2] = json.dumps(event, sort_keys=True, separators=(",", ":")).encode()
        broken = 3
    path.write_bytes(b"\n".join(lines) + b"\n")
    return broken


@pytest.mark.parametrize("how", ["flipped byte", "deleted line", "swapped lines", "forged signature"])
async def test_tampered_ledger_fails_verify_at_the_right_seq(
    log: EventLog, settings: Settings, how: str
) -> None:
    async with running_mirror(log):
        await append_story(log, sessions=1, per_session=12)
        await caught_up(log)
    broken = tamper_ledger(settings, how)
    keyring = KeyStore(settings.data_dir).load_keyring()
    (ledger_only,) = verify_ledger_dir(settings.ledger_dir, keyring)
    assert not ledger_only.ok
    assert ledger_only.first_broken_seq == broken
    report = await full_verify(log)
    assert not report.ok and report.sessions[0].first_broken_seq == broken
    result = await asyncio.to_thread(
        run_cli, settings, "verify", "--ledger-only", str(settings.ledger_dir), "--json"
    )
    assert result.returncode == 1
    parsed = json.loads(result.stdout)
    assert parsed["ok"] is False
    assert parsed["sessions"][0]["findings"][0]["seq"] == broken


async def test_ledger_only_verify_needs_no_node(log: EventLog, settings: Settings, tmp_path: Path) -> None:
    async with running_mirror(log):
        await append_story(log, sessions=2, per_session=4)
        await caught_up(log)
    exported = tmp_path / "keyring.json"
    exported.write_text((await asyncio.to_thread(run_cli, settings, "keys", "export-public")).stdout)
    offline = Settings(data_dir=tmp_path / "elsewhere", nats_url="nats://127.0.0.1:1")
    result = await asyncio.to_thread(
        run_cli, offline, "verify", "--ledger-only", str(settings.ledger_dir), "--keyring", str(exported)
    )
    assert result.returncode == 0, result.stderr
    assert "verified: 2 session(s)" in result.stdout


async def test_mirror_picks_up_a_key_trusted_after_it_started(log: EventLog, settings: Settings) -> None:
    """Rotation on another machine: its public key is trusted here while the mirror runs."""
    async with running_mirror(log):
        await append_story(log, sessions=1, per_session=2)
        await caught_up(log)
        other_dir = settings.data_dir.parent / "other-node"
        other = await EventLog.open(Settings(data_dir=other_dir, nats_url=settings.nats_url))
        try:
            with pytest.raises(UntrustedTailError, match="eventloom keys trust"):
                await other.append("s0", "note.added", "other-node", {"n": 99})  # it would fork s0
            for key in KeyStore(other_dir).load_keyring().keys:
                KeyStore(settings.data_dir).trust(key)
            for key in KeyStore(settings.data_dir).load_keyring().keys:
                KeyStore(other_dir).trust(key)
            await other.append("s0", "note.added", "other-node", {"n": 100})
            await caught_up(log)
        finally:
            await other.close()
    assert len(lines_of(settings, "s0")) == 3
    assert await list_dead_letters(log.client, "ledger-mirror") == []
    assert (await full_verify(log)).ok


async def test_non_canonical_and_misrouted_messages_are_dead_lettered(
    log: EventLog, settings: Settings
) -> None:
    async with running_mirror(log):
        (event,) = await append_story(log, sessions=1, per_session=1)
        pretty = json.dumps(json.loads(encode_event(event)), indent=1).encode()
        await log.client.jetstream().publish(log.layout.subject_for("s0"), pretty)
        await log.client.jetstream().publish(log.layout.subject_for("elsewhere"), encode_event(event))
        await log.client.jetstream().publish(log.layout.subject_for("s0"), b"not json at all")
        await caught_up(log)
    letters = await list_dead_letters(log.client, "ledger-mirror")
    reasons = sorted(d.error.split(":")[0].split(" eventloom.")[0] for d in letters)
    assert reasons == ["event is not in canonical form", "not a valid event", "published on wrong subject"]
    assert len(lines_of(settings, "s0")) == 1


async def test_verify_reads_the_stream_again_while_it_reads_shorter_than_the_ledger(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a fault a read served by a replica can miss events for a moment: verify reads again
    before it reports the stream short."""
    async with running_mirror(log):
        await append_story(log, per_session=5)
        await caught_up(log)
    read, reads = verify_module.verify_stream, [0]

    async def short_once(*args: Any, **kwargs: Any) -> Any:
        reads[0] += 1
        walks = await read(*args, **kwargs)
        return {"s0": walks["s0"]} if reads[0] == 1 else walks  # s1 missing from the first read

    monkeypatch.setattr(verify_module, "verify_stream", short_once)
    report = await full_verify(log)
    assert reads == [2] and report.ok, report


async def test_the_mirror_reads_a_gap_again_when_a_read_comes_back_short(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A gap in the ledger is filled from the stream; a read that misses the events for a moment (a
    replica after a fault) is tried again rather than dead-lettering the events after the gap."""
    await append_story(log, sessions=1, per_session=5)
    read, reads = read_stream, [0]

    def short_first(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        reads[0] += 1
        return read(*args, **kwargs) if reads[0] > 2 else _nothing()  # start's read, then the first refetch

    monkeypatch.setattr(mirror_module, "read_stream", short_first)
    mirror = LedgerMirror(log.client, log.layout, KeyStore(log.settings.data_dir), log.settings.ledger_dir)
    await mirror.start()
    try:
        await mirror._refetch("s0", before_stream_seq=1_000, wanted_seq=6)
    finally:
        await mirror._consumer.close()
    assert reads == [3] and mirror.stats.refetched == 5 and mirror.stats.dead_lettered == 0
    assert len(lines_of(log.settings, "s0")) == 5


async def _nothing() -> AsyncIterator[Any]:
    for _ in ():
        yield
