"""What must hold after every fault (issue 23, item 3), counted rather than asserted so that
tests/test_cluster_faults.py asserts on it and bench/cluster.py reports it:

- every acknowledged (session, seq, hash) of tests/durability_client.py is in the stream (`lost` counts
  those that are not), each probe index at most once (`duplicates`);
- every session's chain is linear from seq 1: no gap, fork or duplicate, each signature valid;
- the ledger files hold exactly the stream's events, once the mirror has caught up;
- `eventloom verify --json` is ok; `eventloom repair` puts back from the ledger what the stream lost;
- the keyword read model equals a clean rebuild of it (`eventloom rebuild keyword`).

The commands run in-process (typer's runner: no interpreter start-up to pay for); call them from a thread
when an event loop is running, since each runs its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec
from typer.testing import CliRunner

from eventloom.bus.consumer import read_stream
from eventloom.bus.transient import retried_while_electing
from eventloom.chain import GENESIS, ChainBreak, ChainTip, check_next
from eventloom.dlq import DeadLetter, list_dead_letters
from eventloom.event import Event, decode_event
from eventloom.keys import KeyStore
from eventloom.ledger.files import iter_lines, ledger_path, read_tip
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.cli import app
from projectors.backends import KEYWORD_DATABASE
from projectors.generations import Generations

KEYWORD_CONSUMER: Final = "projector-keyword"
_DOC_ROWS: Final = (
    "SELECT session, seq, event_hash, event_type, kind, title, text FROM docs "
    "ORDER BY session, seq, kind, title, text"
)


@dataclass(frozen=True)
class Ack:
    session: str
    seq: int
    hash: str
    began: float | None = None  # time.monotonic() when the acknowledged call began (`--times`)
    acked: float | None = None


def read_acks(path: Path) -> list[Ack]:
    """The acknowledgements written so far (a last line still being written is left for later)."""
    acks = []
    for line in path.read_text().split("\n")[:-1]:
        session, seq, event_hash, *times = line.split()
        began, acked = (float(times[0]), float(times[1])) if len(times) == 2 else (None, None)
        acks.append(Ack(session, int(seq), event_hash, began, acked))
    return acks


@dataclass
class Audit:
    acked: int = 0
    stream_events: int = 0
    lost: list[Ack] = field(default_factory=list)
    duplicates: int = 0  # probe indexes stored more than once, counted once per extra copy
    chain_breaks: dict[str, str] = field(default_factory=dict)  # session -> the first break

    @property
    def ok(self) -> bool:
        return not self.lost and not self.duplicates and not self.chain_breaks

    def summary(self) -> dict[str, Any]:
        return {
            "acked": self.acked,
            "stream_events": self.stream_events,
            "lost": len(self.lost),
            "lost_examples": [f"{a.session}#{a.seq}" for a in self.lost[:5]],
            "duplicates": self.duplicates,
            "chain_breaks": self.chain_breaks,
        }


async def stream_sessions(log: EventLog) -> tuple[dict[str, list[Event]], dict[str, str]]:
    """Every event in the stream by session, and the sessions holding a message that does not decode."""
    sessions: dict[str, list[Event]] = defaultdict(list)
    undecodable: dict[str, str] = {}
    subjects = log.layout.partition_subjects()
    async for message in read_stream(log.client, log.layout.name, subjects):
        try:
            event = decode_event(message.data)
        except Exception as exc:  # a damaged store may hand out bytes that are no event
            undecodable.setdefault(message.subject, f"stream seq {message.metadata.sequence.stream}: {exc}")
            continue
        sessions[event.session].append(event)
    return dict(sessions), undecodable


async def audit(log: EventLog, acks: list[Ack]) -> tuple[Audit, dict[str, list[Event]]]:
    stream, undecodable = await retried_while_electing(lambda: stream_sessions(log), "the stream read")
    keyring = await asyncio.to_thread(KeyStore(log.settings.data_dir).load_keyring)
    found = Audit(acked=len(acks), stream_events=sum(len(e) for e in stream.values()))
    found.chain_breaks.update(undecodable)
    for session, events in stream.items():
        tip = GENESIS
        try:
            for event in events:  # seq contiguous from 1, prev_hash links, hash, signature
                tip = check_next(event, tip, keyring)
        except ChainBreak as exc:
            found.chain_breaks[session] = str(exc)
        copies = Counter(event.payload.get("i") for event in events)
        found.duplicates += sum(n - 1 for n in copies.values())
    stored = {(e.session, e.seq): e.hash for events in stream.values() for e in events}
    found.lost = [a for a in acks if stored.get((a.session, a.seq)) != a.hash]
    return found, stream


async def audit_settled(
    log: EventLog, acks: list[Ack], tries: int = 10, wait_s: float = 1.0
) -> tuple[Audit, dict[str, list[Event]], int]:
    """`audit`, read again (`tries` times, `wait_s` apart) while acknowledged events are missing: a read
    served by a replica that came back with a damaged store can miss events for a moment after it says it
    is current (seen with a truncated `.blk`). Also returns how many the first read missed."""
    found, stream = await audit(log, acks)
    first_missing = len(found.lost)
    for _ in range(tries if found.lost else 0):
        await asyncio.sleep(wait_s)
        found, stream = await audit(log, acks)
        if not found.lost:
            break
    return found, stream, first_missing


async def ledger_differences(
    log: EventLog, stream: dict[str, list[Event]], timeout: float = 60.0
) -> dict[str, str]:
    """The sessions whose ledger file is not exactly the stream's events, once the mirror has caught up
    (within `timeout`): judged by the files, not the consumer's pending counts (see `projected_through`)."""
    deadline = time.monotonic() + timeout
    while True:
        differences = await asyncio.to_thread(_compare_ledger, log.settings.ledger_dir, stream)
        if not differences or time.monotonic() > deadline:
            return differences
        await asyncio.sleep(0.2)


def _compare_ledger(ledger_dir: Path, stream: dict[str, list[Event]]) -> dict[str, str]:
    differences = {}
    for session, events in stream.items():
        path = ledger_path(ledger_dir, session)
        if read_tip(path) != ChainTip(events[-1].seq, events[-1].hash):
            differences[session] = f"ledger tip {read_tip(path)} != stream tip seq {events[-1].seq}"
            continue
        hashes = [decode_event(line).hash for _, line in iter_lines(path)]
        if hashes != [e.hash for e in events]:
            differences[session] = f"ledger {len(hashes)} events != stream {len(events)}"
    return differences


def cli_json(settings: Settings, *args: str) -> tuple[int, dict[str, Any]]:
    """`eventloom <args> --json` on the node's data dir: its exit code and its JSON report."""
    result = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), *args, "--json"])
    start = result.stdout.find("{")
    if start < 0:
        raised = "".join(traceback.format_exception(result.exception)) if result.exception else ""
        command = " ".join(args)
        raise AssertionError(f"eventloom {command}: no JSON ({result.exit_code}): {result.output}{raised}")
    report: dict[str, Any] = msgspec.json.decode(result.stdout[start:].encode())
    return result.exit_code, report


def _read_only(settings: Settings) -> sqlite3.Connection | None:
    generation = Generations(settings.data_dir / "readmodels" / "keyword").live()
    if generation is None:
        return None
    return sqlite3.connect(f"file:{generation / KEYWORD_DATABASE}?mode=ro", uri=True)


def keyword_docs(settings: Settings) -> list[tuple[Any, ...]]:
    """The live keyword model's documents, read-only from its SQLite file."""
    db = _read_only(settings)
    if db is None:
        return []
    with contextlib.closing(db):
        return list(db.execute(_DOC_ROWS))


def keyword_checkpoints(settings: Settings) -> dict[str, int]:
    """The live keyword model's applied seq per session."""
    db = _read_only(settings)
    if db is None:
        return {}
    with contextlib.closing(db):
        return {str(session): int(seq) for session, seq in db.execute("SELECT session, seq FROM checkpoints")}


async def projected_through(settings: Settings, tips: dict[str, int], timeout: float) -> dict[str, int]:
    """Until the live keyword model has applied every session up to `tips` (or `timeout`): its checkpoints.

    Its own checkpoints, not the consumer's pending counts: those come from the consumer's leader, and a
    leader on a replica still catching up (after a store fault) can report nothing pending for a moment."""
    deadline = time.monotonic() + timeout
    while True:
        applied = await asyncio.to_thread(keyword_checkpoints, settings)
        if all(applied.get(s, 0) >= seq for s, seq in tips.items()) or time.monotonic() > deadline:
            return applied
        await asyncio.sleep(0.2)


@dataclass(frozen=True)
class KeywordComparison:
    """The live keyword model against a clean rebuild; where they differ, what the live one misses."""

    live_docs: int
    rebuilt_docs: int
    missing: dict[str, list[int]]  # session -> the event seqs with a rebuilt document but no live one
    dead_letters: list[DeadLetter]  # what the live consumer gave up on (refused or failed)
    behind: dict[str, tuple[int, int]]  # session -> (applied, stream tip) where it had not caught up

    @property
    def equal(self) -> bool:
        return not self.missing and self.live_docs == self.rebuilt_docs

    def summary(self) -> dict[str, Any]:
        return {
            "live_docs": self.live_docs,
            "rebuilt_docs": self.rebuilt_docs,
            "equal": self.equal,
            "missing": {s: _ranges(seqs) for s, seqs in self.missing.items()},
            "behind": self.behind,
            "dead_letters": len(self.dead_letters),
            "dead_letter_examples": [f"{d.session}#{d.seq}: {d.error}" for d in self.dead_letters[:5]],
        }


def _ranges(seqs: list[int]) -> str:
    """1,2,3,7 -> '1-3,7': a missing run reads as one."""
    runs: list[list[int]] = []
    for seq in sorted(seqs):
        if runs and seq == runs[-1][1] + 1:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs)


async def keyword_equals_rebuild(
    log: EventLog, stream: dict[str, list[Event]], timeout: float = 60.0
) -> KeywordComparison:
    """Once the live keyword projector has applied every event of `stream`: are its documents those of a
    clean rebuild?"""
    tips = {session: events[-1].seq for session, events in stream.items() if events}
    applied = await projected_through(log.settings, tips, timeout)
    behind = {s: (applied.get(s, 0), seq) for s, seq in tips.items() if applied.get(s, 0) < seq}
    live = await asyncio.to_thread(keyword_docs, log.settings)
    letters = await list_dead_letters(log.client, KEYWORD_CONSUMER)
    code, report = await asyncio.to_thread(cli_json, log.settings, "rebuild", "keyword")
    if code != 0:
        raise AssertionError(f"eventloom rebuild keyword failed ({code}): {report}")
    rebuilt = await asyncio.to_thread(keyword_docs, log.settings)  # the rebuild swapped itself in
    live_events = {(row[0], row[1]) for row in live}
    missing: dict[str, list[int]] = defaultdict(list)
    for session, seq in sorted({(row[0], row[1]) for row in rebuilt} - live_events):
        missing[session].append(seq)
    return KeywordComparison(len(live), len(rebuilt), dict(missing), letters, behind)
