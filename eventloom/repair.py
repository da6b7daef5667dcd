"""`repair`: put back into the stream the events the verified ledger holds and the stream lost.

After a power loss under interval sync the stream can end before the ledger (the ledger is fsynced per
batch, the stream only every interval), and after losing the NATS store it can be empty while the ledger is
whole. Each such event is re-published with its original bytes (never re-signed), in seq order, with
`Nats-Msg-Id` = its hash and the subject's expected last sequence, so a repair can never fork a session
that moved on meanwhile. The ledger mirror skips a re-published event: its file already has that seq and
hash. Nothing is published for a session whose ledger does not verify, where ledger and stream hold
different events at one seq, or where the lost events are not all after the stream's last one (JetStream
only appends at the end of a subject: a hole in the middle cannot be refilled in order).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import msgspec
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.consumer import read_stream
from eventloom.bus.stream import StreamLayout
from eventloom.bus.transient import retried_while_electing
from eventloom.chain import self_problem
from eventloom.errors import EventloomError
from eventloom.event import decode_event, encode_event, utc_timestamp
from eventloom.keys import Keyring
from eventloom.ledger.files import iter_lines, ledger_path
from eventloom.ledger.manifest import MANIFEST_NAME
from eventloom.verify import verify_ledger_dir

WRONG_LAST_SEQUENCE: Final = 10071
Status = Literal["ok", "repairable", "repaired", "refused"]
Progress = Callable[[int], None]


class Conflict(msgspec.Struct, frozen=True):
    """Ledger and stream hold different events at one seq."""

    seq: int
    ledger_hash: str | None
    stream_hash: str


class SessionRepair(msgspec.Struct, kw_only=True):
    session: str
    status: Status
    ledger_seq: int = 0  # the ledger's last seq
    stream_seq: int = 0  # the stream's last event seq for the session
    missing_from: int | None = None  # the events the stream lacks, as a seq range
    missing_to: int | None = None
    subject_seq: int = 0  # the stream sequence of the subject's last message: the first publish names it
    republished: int = 0
    conflict: Conflict | None = None
    reason: str | None = None
    advice: str | None = None

    @property
    def to_publish(self) -> int:
        if self.status != "repairable" or self.missing_from is None or self.missing_to is None:
            return 0
        return self.missing_to - self.missing_from + 1


class RepairReport(msgspec.Struct, kw_only=True):
    ok: bool  # nothing refused, nothing left to repair
    applied: bool
    checked_at: str
    ledger_dir: str
    stream: str
    sessions: list[SessionRepair]


@dataclass
class _StreamSession:
    """One session as the stream holds it: valid events by seq, and the subject's last stream sequence
    (of any message, valid or not: it is what the next publish must name)."""

    hashes: dict[int, str] = field(default_factory=dict)
    last_subject_seq: int = 0
    forks: list[Conflict] = field(default_factory=list)


@dataclass
class _LedgerSession:
    hashes: list[str]  # index seq - 1
    problem: str | None = None


class RepairRefusedError(EventloomError):
    """A session cannot be repaired as planned (it moved on meanwhile, or the server dropped a message)."""


async def plan_repair(
    client: Client, layout: StreamLayout, keyring: Keyring, ledger_dir: Path, session: str | None = None
) -> RepairReport:
    """Compare the verified ledger with the stream, per session; nothing is published."""
    ledger = await asyncio.to_thread(_read_ledger, ledger_dir, keyring, session)
    stream = await retried_while_electing(
        lambda: _read_stream_sessions(client, layout, keyring, session), f"stream {layout.name}"
    )
    names = sorted(set(ledger) | set(stream))
    sessions = [_plan_session(name, ledger.get(name), stream.get(name)) for name in names]
    return _report(sessions, applied=False, ledger_dir=ledger_dir, stream=layout.name)


async def apply_repair(
    client: Client,
    layout: StreamLayout,
    ledger_dir: Path,
    plan: RepairReport,
    progress: Progress | None = None,
) -> RepairReport:
    """Re-publish every repairable session of `plan`; a session that cannot go on is marked refused."""
    for item in plan.sessions:
        if item.status != "repairable":
            continue
        try:
            item.republished = await _republish(client, layout, ledger_dir, item, progress)
        except RepairRefusedError as exc:
            item.status, item.reason = "refused", str(exc)
            continue
        item.status = "repaired"
    return _report(plan.sessions, applied=True, ledger_dir=ledger_dir, stream=layout.name)


def _report(sessions: list[SessionRepair], *, applied: bool, ledger_dir: Path, stream: str) -> RepairReport:
    return RepairReport(
        ok=all(s.status in ("ok", "repaired") for s in sessions),
        applied=applied,
        checked_at=utc_timestamp(),
        ledger_dir=str(ledger_dir),
        stream=stream,
        sessions=sessions,
    )


def _read_ledger(ledger_dir: Path, keyring: Keyring, session: str | None) -> dict[str, _LedgerSession]:
    """Every session's event hashes, after verifying its file, chain, signatures and the manifest."""
    reports = verify_ledger_dir(ledger_dir, keyring, None, require_file=False)
    manifest_problem = "; ".join(f.reason for r in reports if r.session == MANIFEST_NAME for f in r.findings)
    found: dict[str, _LedgerSession] = {}
    for report in reports:
        if report.session == MANIFEST_NAME or (session is not None and report.session != session):
            continue
        if not report.ok:
            reasons = "; ".join(f"seq {f.seq} [{f.where}]: {f.reason}" for f in report.findings)
            found[report.session] = _LedgerSession([], f"the ledger does not verify: {reasons}")
        elif manifest_problem:
            found[report.session] = _LedgerSession([], f"the ledger's manifest: {manifest_problem}")
        else:
            path = ledger_path(ledger_dir, report.session)
            found[report.session] = _LedgerSession([decode_event(line).hash for _, line in iter_lines(path)])
    return found


async def _read_stream_sessions(
    client: Client, layout: StreamLayout, keyring: Keyring, session: str | None = None
) -> dict[str, _StreamSession]:
    """The stream's valid events per session; messages that are not (quarantined ones) are stepped over."""
    subjects = [layout.subject_for(session)] if session else layout.partition_subjects()
    found: dict[str, _StreamSession] = {}
    async for message in read_stream(client, layout.name, subjects):
        name = message.subject.rsplit(".", 1)[-1]
        entry = found.setdefault(name, _StreamSession())
        entry.last_subject_seq = message.metadata.sequence.stream
        try:
            event = decode_event(message.data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if encode_event(event) != message.data or event.session != name or self_problem(event, keyring):
            continue
        known = entry.hashes.get(event.seq)
        if known is not None and known != event.hash:
            entry.forks.append(Conflict(event.seq, known, event.hash))
        entry.hashes.setdefault(event.seq, event.hash)
    return found


def _plan_session(name: str, ledger: _LedgerSession | None, stream: _StreamSession | None) -> SessionRepair:
    ledger = ledger or _LedgerSession([])
    stream = stream or _StreamSession()
    item = SessionRepair(
        session=name, status="ok", ledger_seq=len(ledger.hashes), stream_seq=max(stream.hashes, default=0)
    )
    item.subject_seq = stream.last_subject_seq
    if ledger.problem is not None:
        return _refuse(
            item, ledger.problem, "fix or restore the ledger first (`eventloom verify --ledger-only`)"
        )
    if stream.forks:
        fork = stream.forks[0]
        item.conflict = fork
        return _refuse(item, f"the stream holds two different events at seq {fork.seq}", None)
    for seq in sorted(stream.hashes):
        ledger_hash = ledger.hashes[seq - 1] if seq <= len(ledger.hashes) else None
        if ledger_hash is not None and ledger_hash != stream.hashes[seq]:
            item.conflict = Conflict(seq, ledger_hash, stream.hashes[seq])
            return _refuse(
                item,
                f"ledger and stream disagree on seq {seq}: ledger {ledger_hash}, stream {stream.hashes[seq]}",
                "find out which copy is genuine (`eventloom verify`); repair never overwrites either",
            )
    missing = [seq for seq in range(1, len(ledger.hashes) + 1) if seq not in stream.hashes]
    if not missing:
        return item
    item.missing_from, item.missing_to = missing[0], missing[-1]
    if missing[0] <= item.stream_seq:
        return _refuse(
            item,
            f"the stream lacks seq {missing[0]} but holds seq {item.stream_seq} after it: JetStream only "
            "appends at the end of a subject, so a hole in the middle cannot be refilled in order",
            "stop appending to this session, let the ledger mirror catch up (`eventloom verify`), purge the "
            "session's subject (`nats stream purge <stream> --subject <subject>`), then run "
            "`eventloom repair --apply` to re-publish the whole session from the ledger",
        )
    item.status = "repairable"
    return item


def _refuse(item: SessionRepair, reason: str, advice: str | None) -> SessionRepair:
    item.status, item.reason, item.advice = "refused", reason, advice
    return item


async def _republish(
    client: Client, layout: StreamLayout, ledger_dir: Path, item: SessionRepair, progress: Progress | None
) -> int:
    """Publish the session's missing ledger lines as they are, each guarded by the subject's last sequence."""
    assert item.missing_from is not None and item.missing_to is not None
    lines = await asyncio.to_thread(
        _ledger_lines, ledger_dir, item.session, item.missing_from, item.missing_to
    )
    js = client.jetstream(timeout=10.0)
    subject = layout.subject_for(item.session)
    expected = item.subject_seq
    published = 0
    for seq, (line, event_hash) in enumerate(lines, start=item.missing_from):
        headers = {"Nats-Msg-Id": event_hash, "Nats-Expected-Last-Subject-Sequence": str(expected)}
        try:
            ack = await js.publish(subject, line, headers=headers)
        except nats.js.errors.APIError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                raise RepairRefusedError(
                    f"the session moved on while seq {seq} was being re-published ({published} were): "
                    "run `eventloom repair` again to see where it stands"
                ) from None
            raise
        if ack.duplicate:
            raise RepairRefusedError(
                f"nats-server took seq {seq} (hash {event_hash}) for a duplicate of stream message {ack.seq} "
                "and did not store it: its duplicate window still remembers that message id; run "
                "`eventloom repair --apply` again after the window (EVENTLOOM_DUPLICATE_WINDOW_S) has passed"
            )
        expected = int(ack.seq)
        published += 1
        if progress is not None:
            progress(1)
    return published


def _ledger_lines(ledger_dir: Path, session: str, first: int, last: int) -> list[tuple[bytes, str]]:
    """The original bytes and hash of seqs `first`..`last` (line n is seq n in a verified ledger file)."""
    chosen = []
    for number, line in iter_lines(ledger_path(ledger_dir, session)):
        if first <= number <= last:
            event = decode_event(line)
            if event.seq != number:
                raise RepairRefusedError(f"ledger line {number} holds seq {event.seq}: the file changed")
            chosen.append((line, event.hash))
    if len(chosen) != last - first + 1:
        raise RepairRefusedError(f"the ledger file no longer holds seqs {first}..{last}: it changed")
    return chosen
