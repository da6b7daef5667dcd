"""The appender against a real nats-server: chains, concurrency, idempotency, rejection."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from eventloom.chain import GENESIS, check_next
from eventloom.errors import EventValidationError, WrongExpectedSeqError
from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings
from eventloom.tail import event_by_seq
from tests.electing import electing_once

pytestmark = pytest.mark.anyio
HERE = Path(__file__).resolve().parent


def assert_linear_chain(events: list[Event], settings: Settings) -> None:
    keyring = KeyStore(settings.data_dir).load_keyring()
    tip = GENESIS
    for event in events:
        tip = check_next(event, tip, keyring)


async def test_sequential_appends_form_a_verified_chain(log: EventLog, settings: Settings) -> None:
    appended = [await log.append("s1", "note.added", "tester", {"n": i}) for i in range(5)]
    stored = [e async for e in log.events("s1")]
    assert stored == appended
    assert [e.seq for e in stored] == [1, 2, 3, 4, 5]
    assert stored[0].prev_hash is None
    assert_linear_chain(stored, settings)


async def test_pipelined_batches_and_interleaved_sessions(log: EventLog, settings: Settings) -> None:
    requests = [
        AppendRequest(session=f"s{i % 3}", type="note.added", actor="tester", payload={"n": i})
        for i in range(900)
    ]
    appended = await log.append_many(requests)
    assert [e.payload["n"] for e in appended] == list(range(900))
    for session in ("s0", "s1", "s2"):
        stored = [e async for e in log.events(session)]
        assert [e.seq for e in stored] == list(range(1, 301))
        assert [e.payload["n"] for e in stored] == [n for n in range(900) if f"s{n % 3}" == session]
        assert_linear_chain(stored, settings)


async def test_two_appenders_in_one_process_never_fork(settings: Settings) -> None:
    first, second = await EventLog.open(settings), await EventLog.open(settings)
    try:
        await asyncio.gather(
            *(first.append("race", "note.added", "a", {"n": i}) for i in range(60)),
            *(second.append("race", "note.added", "b", {"n": i}) for i in range(60)),
        )
        stored = [e async for e in first.events("race")]
    finally:
        await first.close()
        await second.close()
    assert [e.seq for e in stored] == list(range(1, 121))
    assert_linear_chain(stored, settings)


@pytest.mark.slow
async def test_two_processes_appending_one_session_yield_one_linear_chain(
    log: EventLog, settings: Settings
) -> None:
    assert settings.nats_url is not None
    await log.append(
        "shared", "session.started", "setup", {"agent": "setup"}
    )  # creates the key both sign with
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "concurrent_writer.py"),
                str(settings.data_dir),
                settings.nats_url,
                "shared",
                name,
                "400",
            ],
        )
        for name in ("writer-a", "writer-b")
    ]
    for process in writers:
        assert process.wait(timeout=120) == 0
    stored = [e async for e in log.events("shared")]
    assert [e.seq for e in stored] == list(range(1, 802)), "gaps or duplicates in the session"
    assert_linear_chain(stored, settings)
    for name in ("writer-a", "writer-b"):
        numbers = sorted(e.payload["n"] for e in stored if e.actor == name)
        assert numbers == list(range(400)), f"{name} lost or duplicated events"


async def test_expected_seq_appends_only_at_that_seq(log: EventLog, settings: Settings) -> None:
    assert (await log.append("cas", "note.added", "a", {"n": 1}, expected_seq=0)).seq == 1
    with pytest.raises(WrongExpectedSeqError, match=r"expected new .* but is at seq 1") as caught:
        await log.append("cas", "note.added", "a", {"n": 2}, expected_seq=0)
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    assert (await log.append("cas", "note.added", "a", {"n": 2}, expected_seq=1)).seq == 2
    batch = [
        AppendRequest(
            session="cas", type="note.added", actor="a", payload={"n": n}, expected_seq=1 if n == 3 else None
        )
        for n in (3, 4)
    ]
    with pytest.raises(WrongExpectedSeqError):
        await log.append_many(batch)  # the condition covers the batch it starts: neither lands
    with pytest.raises(EventValidationError, match="expected_seq"):
        await log.append("cas", "note.added", "a", {}, expected_seq=-1)
    assert [e.payload["n"] for e in [e async for e in log.events("cas")]] == [1, 2]


async def test_expected_seq_lets_exactly_one_of_two_racing_writers_win(settings: Settings) -> None:
    """Each writer read seq 1 and appends "only if still at 1": across processes' caches, one wins."""
    first, second = await EventLog.open(settings), await EventLog.open(settings)
    try:
        await first.append("cas-race", "note.added", "a", {"n": 0})
        await second.append("cas-race", "note.added", "b", {"n": 0}, expected_seq=1)  # warms b's tail cache
        outcomes = await asyncio.gather(
            first.append("cas-race", "note.added", "a", {"n": 1}, expected_seq=2),
            second.append("cas-race", "note.added", "b", {"n": 1}, expected_seq=2),
            return_exceptions=True,
        )
        stored = [e async for e in first.events("cas-race")]
    finally:
        await first.close()
        await second.close()
    assert sorted(type(o).__name__ for o in outcomes) == ["Event", "WrongExpectedSeqError"]
    assert [e.seq for e in stored] == [1, 2, 3]
    assert_linear_chain(stored, settings)


async def test_idempotency_key_returns_the_original_event(log: EventLog) -> None:
    first = await log.append("s1", "note.added", "tester", {"n": 1}, idempotency_key="order-42")
    again = await log.append("s1", "note.added", "tester", {"n": 1}, idempotency_key="order-42")
    other = await log.append("s1", "note.added", "tester", {"n": 3}, idempotency_key="order-43")
    assert again == first
    assert other.seq == 2
    assert [e.seq async for e in log.events("s1")] == [1, 2]


async def test_idempotency_key_survives_the_dedup_window(tmp_path: Path, nats_server: object) -> None:
    """Past the stream's duplicate window the key bucket still answers with the original event."""
    url = nats_server.url  # type: ignore[attr-defined]
    settings = Settings(data_dir=tmp_path / "d", nats_url=url, duplicate_window_s=1)
    async with await EventLog.open(settings) as log:
        first = await log.append("s1", "note.added", "tester", {"n": 1}, idempotency_key="k")
        await asyncio.sleep(1.5)
        again = await log.append("s1", "note.added", "tester", {"n": 1}, idempotency_key="k")
        assert again == first
        assert [e.seq async for e in log.events("s1")] == [1]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"session": "bad session!"}, "session"),
        ({"session": ""}, "session"),
        ({"type": "NoDots"}, "type"),
        ({"type": "task.Completed"}, "type"),
        ({"actor": ""}, "actor"),
        ({"payload": {"x": float("nan")}}, "payload.x"),
        ({"payload": {"deep": [1, {"y": float("inf")}]}}, "payload.deep[1].y"),
        ({"payload": {"big": "x" * (1024 * 1024 + 1)}}, "payload"),
        ({"payload": {"n": 2**70}}, "payload.n"),
        ({"payload": {"s": "a\x00b"}}, "payload.s"),
        ({"caused_by": ["not-a-hash"]}, "caused_by[0]"),
        ({"type": "task.completed", "payload": {"summary": "no task id"}}, "payload.task_id"),
        ({"type": "decision.made", "payload": {"decision_id": "d1", "title": 5}}, "payload.title"),
        ({"idempotency_key": ""}, "idempotency_key"),
    ],
)
async def test_rejected_appends_name_the_field_and_write_nothing(
    log: EventLog, request_fields: dict[str, object], field: str
) -> None:
    fields: dict[str, object] = {"session": "s1", "type": "note.added", "actor": "tester", "payload": {}}
    fields.update(request_fields)
    with pytest.raises(EventValidationError) as raised:
        await log.append_many([AppendRequest(**fields)])  # type: ignore[arg-type]
    assert raised.value.field == field
    assert [e async for e in log.events()] == []


async def test_one_bad_request_rejects_the_whole_batch(log: EventLog) -> None:
    good = AppendRequest(session="s1", type="note.added", actor="tester", payload={"n": 1})
    bad = AppendRequest(session="s1", type="note.added", actor="tester", payload={"n": float("nan")})
    with pytest.raises(EventValidationError) as raised:
        await log.append_many([good, good, bad])
    assert raised.value.field == "[2].payload.n"
    assert [e async for e in log.events()] == []


async def test_timestamps_never_go_backwards_within_a_session(log: EventLog) -> None:
    events = await log.append_many(
        [AppendRequest(session="s1", type="note.added", actor="t", payload={"n": i}) for i in range(50)]
    )
    assert [e.ts for e in events] == sorted(e.ts for e in events)
    assert all(e.ts.endswith("Z") and len(e.ts) == 27 for e in events)


async def test_event_by_seq_finds_any_event_of_a_session(log: EventLog) -> None:
    events = await log.append_many(
        [
            AppendRequest(session=f"s{n % 3}", type="note.added", actor="t", payload={"n": n})
            for n in range(90)
        ]
    )
    for event in events[::7]:
        found = await event_by_seq(log.client, log.layout, event.session, event.seq)
        assert found is not None and found.event == event
    assert await event_by_seq(log.client, log.layout, "s0", 31) is None
    assert await event_by_seq(log.client, log.layout, "nobody", 1) is None


async def test_a_jetstream_briefly_unavailable_is_waited_out_not_refused(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """503 "JetStream system temporarily unavailable" comes while a cluster elects a leader: retried, and
    the append lands once, as for a timeout."""
    js, refusals = log.appender._js_retried, [0]
    monkeypatch.setattr(js, "publish", electing_once(js.publish, refusals))
    event = await log.append("elect", "note.added", "agent:t", {"text": "x"}, idempotency_key="k1")
    again = await log.append("elect", "note.added", "agent:t", {"text": "x"}, idempotency_key="k1")
    assert refusals == [1] and again.hash == event.hash and event.seq == 1
