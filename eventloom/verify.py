"""`verify`: chain, hashes, signatures and seq continuity of ledger and stream, and their parity."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec
import nats.js.errors
from nats.aio.client import Client

from eventloom.bus.consumer import read_stream
from eventloom.bus.stream import StreamLayout
from eventloom.bus.transient import retried_while_electing
from eventloom.chain import GENESIS, ChainBreak, ChainTip, check_link, self_problem
from eventloom.dlq import list_dead_letters
from eventloom.event import Event, decode_event, encode_event, utc_timestamp
from eventloom.keys import Keyring
from eventloom.ledger.files import iter_lines, ledger_path, ledger_sessions
from eventloom.ledger.manifest import MANIFEST_NAME, Manifest, ManifestError, read_manifest
from eventloom.ledger.mirror import MIRROR_CONSUMER
from eventloom.quarantine import Quarantined, cleared_digests, message_digest


class Finding(msgspec.Struct, frozen=True):
    """The first place a session's log is broken, and why."""

    where: str  # "ledger", "stream", "parity" or "dead-letter"
    seq: int
    reason: str


class SessionReport(msgspec.Struct, kw_only=True):
    session: str
    ok: bool = True
    ledger_events: int | None = None
    stream_events: int | None = None
    last_hash: str | None = None
    findings: list[Finding] = msgspec.field(default_factory=list)
    quarantine_cleared: int = 0  # messages stepped over that an operator reviewed (`eventloom quarantine`)

    @property
    def first_broken_seq(self) -> int | None:
        return min((f.seq for f in self.findings), default=None)


class VerifyReport(msgspec.Struct, kw_only=True):
    ok: bool
    checked_at: str
    ledger_dir: str | None
    stream: str | None
    sessions: list[SessionReport]


@dataclass
class _ChainWalk:
    """Walks one session's events in order and remembers the first break.

    A ledger line that is not a valid event breaks the ledger. A stream message that is not one (bytes
    published past the appender, a foreign signature) is quarantined instead: the appender and every
    consumer step over it, so the walk does too, and `eventloom quarantine clear` records it as reviewed.
    """

    tip: ChainTip = GENESIS
    count: int = 0
    broken: ChainBreak | None = None
    quarantined: list[Quarantined] = field(default_factory=list)
    checkpoint: int | None = None  # remember the hash at this seq (the signed manifest's head)
    checkpoint_hash: str | None = None

    def feed(self, session: str, line_or_event: bytes, keyring: Keyring, label: str) -> None:
        self.count += 1
        if self.broken is not None:
            return
        own = _own_problem(session, line_or_event, keyring, self.tip.seq + 1, label)
        if isinstance(own, ChainBreak):
            self.broken = own
            return
        try:
            self.tip = check_link(own, self.tip)
        except ChainBreak as exc:
            self.broken = exc
            return
        if self.tip.seq == self.checkpoint:
            self.checkpoint_hash = self.tip.hash

    def feed_message(self, session: str, data: bytes, keyring: Keyring, stream_seq: int) -> None:
        if self.broken is not None:
            self.count += 1
            return
        own = _own_problem(session, data, keyring, self.tip.seq + 1, f"stream message {stream_seq}")
        if isinstance(own, ChainBreak):
            self.quarantined.append(
                Quarantined(stream_seq, session, own.seq, own.reason, message_digest(data))
            )
            return
        self.count += 1
        try:
            self.tip = check_link(own, self.tip)
        except ChainBreak as exc:
            self.broken = exc


def _own_problem(session: str, data: bytes, keyring: Keyring, at_seq: int, label: str) -> Event | ChainBreak:
    """The event in `data`, or why it is not a valid event of `session` on its own."""
    try:
        event = decode_event(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        return ChainBreak(session, at_seq, f"{label} is not a valid event: {exc}")
    if encode_event(event) != data:
        return ChainBreak(session, event.seq, f"{label} is not in canonical form")
    if event.session != session:
        return ChainBreak(session, event.seq, f"{label} belongs to session {event.session}")
    problem = self_problem(event, keyring)
    if problem is not None:
        return ChainBreak(session, event.seq, f"{label}: {problem}")
    return event


def verify_ledger_file(
    path: Path, session: str, keyring: Keyring, checkpoint: int | None = None
) -> _ChainWalk:
    walk = _ChainWalk(checkpoint=checkpoint)
    for number, line in iter_lines(path):
        walk.feed(session, line, keyring, f"line {number}")
    if walk.broken is None and not _ends_with_newline(path):
        walk.broken = ChainBreak(
            session, walk.tip.seq, "the last line is not newline-terminated (torn write?)"
        )
    return walk


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as handle:
        handle.seek(0, 2)
        if handle.tell() == 0:
            return True
        handle.seek(-1, 2)
        return handle.read(1) == b"\n"


def verify_ledger_dir(
    ledger_dir: Path, keyring: Keyring, session: str | None = None, *, require_file: bool = True
) -> list[SessionReport]:
    """Ledger-only verification; needs nothing but the files and the trusted public keys.

    Each session file's chain, and the signed manifest's heads against the files: a file that ends before
    its head, or holds another event there, lost its tail; a head without a file is a lost session. A
    problem with the manifest itself is reported under the session name `MANIFEST.json`."""
    manifest, manifest_report = _manifest_of(ledger_dir, keyring)
    heads = manifest.heads if manifest is not None else {}
    names = [session] if session else sorted(set(ledger_sessions(ledger_dir)) | set(heads))
    reports = [] if manifest_report is None or session else [manifest_report]
    for name in names:
        report = SessionReport(session=name)
        path = ledger_path(ledger_dir, name)
        head = heads.get(name)
        if not path.exists():
            if head is not None:
                lost = f"the file is gone: the signed manifest has this session at seq {head.seq}"
                report.findings.append(Finding("manifest", 1, lost))
            elif require_file:
                report.findings.append(Finding("ledger", 1, f"no ledger file {path}"))
            else:
                continue
        else:
            walk = verify_ledger_file(path, name, keyring, head.seq if head else None)
            report.ledger_events = walk.count
            report.last_hash = walk.tip.hash
            if walk.broken is not None:
                report.findings.append(Finding("ledger", walk.broken.seq, walk.broken.reason))
            elif head is not None and walk.tip.seq < head.seq:
                lost = f"the file ends at seq {walk.tip.seq}; the signed manifest has seq {head.seq}"
                report.findings.append(Finding("manifest", walk.tip.seq + 1, lost))
            elif head is not None and walk.checkpoint_hash != head.hash:
                report.findings.append(
                    Finding("manifest", head.seq, "not the event the signed manifest names at this seq")
                )
        report.ok = not report.findings
        reports.append(report)
    return reports


def _manifest_of(ledger_dir: Path, keyring: Keyring) -> tuple[Manifest | None, SessionReport | None]:
    try:
        manifest = read_manifest(ledger_dir, keyring)
    except ManifestError as exc:
        return None, SessionReport(
            session=MANIFEST_NAME, ok=False, findings=[Finding("manifest", 0, str(exc))]
        )
    if manifest is None and ledger_sessions(ledger_dir):
        missing = "no signed manifest: a lost tail or a lost session file could not be told"
        return None, SessionReport(
            session=MANIFEST_NAME, ok=False, findings=[Finding("manifest", 0, missing)]
        )
    return manifest, None


async def verify_stream(
    client: Client, layout: StreamLayout, keyring: Keyring, session: str | None
) -> dict[str, _ChainWalk]:
    subjects = [layout.subject_for(session)] if session else layout.partition_subjects()
    walks: dict[str, _ChainWalk] = {}
    async for message in read_stream(client, layout.name, subjects):
        name = message.subject.rsplit(".", 1)[-1]
        walk = walks.setdefault(name, _ChainWalk())
        walk.feed_message(name, message.data, keyring, message.metadata.sequence.stream)
    return walks


async def find_quarantined(
    client: Client, layout: StreamLayout, keyring: Keyring, session: str | None = None
) -> list[Quarantined]:
    """Every quarantined message (cleared ones included), in stream order."""
    walks = await verify_stream(client, layout, keyring, session)
    return sorted((q for walk in walks.values() for q in walk.quarantined), key=lambda q: q.stream_seq)


async def wait_for_mirror(client: Client, layout: StreamLayout, timeout: float) -> bool:
    """True once the ledger mirror has nothing pending (or it does not exist); False on timeout."""
    js = client.jetstream()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            info = await js.consumer_info(layout.name, MIRROR_CONSUMER)
        except nats.js.errors.NotFoundError:
            return False
        if not info.num_pending and not info.num_ack_pending:
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.1)


async def verify_everything(
    client: Client,
    layout: StreamLayout,
    keyring: Keyring,
    ledger_dir: Path,
    *,
    session: str | None = None,
    wait_s: float = 10.0,
) -> VerifyReport:
    # Each read is asked again while a cluster elects a leader: a verify run during a failover waits it
    # out instead of failing with a timeout.
    await retried_while_electing(lambda: wait_for_mirror(client, layout, wait_s), "the ledger mirror")
    ledger_reports = await asyncio.to_thread(
        verify_ledger_dir, ledger_dir, keyring, session, require_file=False
    )
    ledger = {r.session: r for r in ledger_reports}
    stream = await _read_settled(client, layout, keyring, session, ledger)
    cleared = await retried_while_electing(lambda: cleared_digests(client), "the quarantine bucket")
    letters = [
        d
        for d in await retried_while_electing(
            lambda: list_dead_letters(client, MIRROR_CONSUMER), "the dead-letter stream"
        )
        if not session or d.session == session
    ]
    names = sorted(set(ledger) | set(stream) | {d.session or "?" for d in letters})
    reports = []
    for name in names:
        report = ledger.get(name) or SessionReport(session=name, ledger_events=0)
        walk = stream.get(name)
        if walk is not None:
            report.stream_events = walk.count
            if walk.broken is not None:
                report.findings.append(Finding("stream", walk.broken.seq, walk.broken.reason))
            open_ones = [q for q in walk.quarantined if q.digest not in cleared]
            report.quarantine_cleared = len(walk.quarantined) - len(open_ones)
            report.findings += [Finding("quarantine", q.seq, q.reason) for q in open_ones]
            _check_parity(report, walk)
        elif name not in ("?", MANIFEST_NAME):
            report.findings.append(Finding("parity", 1, "session is in the ledger but not in the stream"))
        for letter in letters:
            if (letter.session or "?") == name:
                report.findings.append(
                    Finding("dead-letter", letter.seq or 0, f"stream seq {letter.stream_seq}: {letter.error}")
                )
        report.findings = [
            f for f in report.findings if not (f.where == "ledger" and f.reason.startswith("no "))
        ]
        report.ok = not report.findings
        reports.append(report)
    return VerifyReport(
        ok=all(r.ok for r in reports),
        checked_at=utc_timestamp(),
        ledger_dir=str(ledger_dir),
        stream=layout.name,
        sessions=reports,
    )


_SHORT_READ_ATTEMPTS: Final = 5
_SHORT_READ_WAIT_S: Final = 1.0


async def _read_settled(
    client: Client,
    layout: StreamLayout,
    keyring: Keyring,
    session: str | None,
    ledger: dict[str, SessionReport],
) -> dict[str, _ChainWalk]:
    """The stream's chains, read again (a few times, a second apart) while a session reads shorter than
    its ledger: right after a fault a read served by a replica can miss events for a moment. A stream that
    really lost events reads short every time, and is reported."""
    for attempt in range(_SHORT_READ_ATTEMPTS):
        walks = await retried_while_electing(
            lambda: verify_stream(client, layout, keyring, session), f"stream {layout.name}"
        )
        short = [
            name
            for name, report in ledger.items()
            if (report.ledger_events or 0) > (walks[name].tip.seq if name in walks else 0)
        ]
        if not short or attempt == _SHORT_READ_ATTEMPTS - 1:
            return walks
        await asyncio.sleep(_SHORT_READ_WAIT_S)
    raise AssertionError("unreachable")


def _check_parity(report: SessionReport, walk: _ChainWalk) -> None:
    if walk.broken is not None or any(f.where == "ledger" for f in report.findings):
        return
    ledger_seq = report.ledger_events or 0
    if ledger_seq != walk.tip.seq:
        report.findings.append(
            Finding(
                "parity",
                min(ledger_seq, walk.tip.seq) + 1,
                f"ledger ends at seq {ledger_seq}, stream at seq {walk.tip.seq}",
            )
        )
    elif report.last_hash is not None and report.last_hash != walk.tip.hash:
        report.findings.append(Finding("parity", ledger_seq, "ledger and stream disagree on the last hash"))
    report.last_hash = walk.tip.hash
