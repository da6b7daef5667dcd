"""Turn-by-turn memory for an agent: `after_turn` and `handoff_bundle`.

- `after_turn` appends what was just said as a `transcript.turn` (so it is in the log, cited and
  searchable) and returns the checkout for it: the context the agent should read before answering.
- `handoff_bundle` is what a fresh agent taking over a session needs: a summary of the session, the replay
  of its last events, the integrity of its log (chain, signatures, ledger parity) and a checkout.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Final, Literal

import msgspec

from eventloom.event import Event
from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.position import Position
from eventloom.request import AppendRequest
from eventloom.verify import verify_everything
from readmodels.checkout.budget import clip
from readmodels.checkout.model import DEFAULT_TOKEN_BUDGET, CheckoutRequest, MemoryCheckout
from readmodels.query.protocol import MemoryService

Role = Literal["user", "assistant", "system", "tool"]
DEFAULT_REPLAY: Final = 20
DIGEST_FIELDS: Final = ("title", "text", "summary", "outcome", "command", "name", "path", "goal", "proposal")
HANDOFF_QUESTION: Final = "current goals, open tasks, decisions made and what is known about this work"


class AfterTurn(msgspec.Struct, frozen=True, kw_only=True):
    turn: str
    """The citation of the appended `transcript.turn`."""
    seq: int
    position: str
    """The turn's position, `SESSION/SEQ`: a later read given it as `after` sees the turn."""
    checkout: MemoryCheckout


async def after_turn(
    log: EventLog,
    memory: MemoryService,
    session: str,
    text: str,
    *,
    role: Role = "user",
    speaker: str | None = None,
    turn_id: str | None = None,
    actor: str | None = None,
    principal: str | None = None,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    profile: str = "balanced",
    after: Position | None = None,
) -> AfterTurn:
    """Append the turn, then check out memory for it; with `after`, once that write is readable."""
    payload: dict[str, Any] = {"role": role, "text": text}
    if speaker:
        payload["speaker"] = speaker
    if turn_id:
        payload["turn_id"] = turn_id
    request = CheckoutRequest(
        text=text, session=session, token_budget=token_budget, profile=profile, after=after
    )
    turn = AppendRequest(
        session=session, type="transcript.turn", actor=actor or role, payload=payload, principal=principal
    )
    (stored,) = await log.append_positioned([turn])
    return AfterTurn(
        turn=stored.event.citation,
        seq=stored.event.seq,
        position=stored.position.text,
        checkout=await memory.checkout(request),
    )


class SessionSummary(msgspec.Struct, frozen=True, kw_only=True):
    session: str
    events: int
    first_ts: str | None
    last_ts: str | None
    last_seq: int
    last_hash: str | None
    by_type: dict[str, int]
    actors: list[str]


class ReplayLine(msgspec.Struct, frozen=True, kw_only=True):
    seq: int
    ts: str
    type: str
    actor: str
    digest: str
    citation: str


class Integrity(msgspec.Struct, frozen=True, kw_only=True):
    ok: bool
    stream_events: int | None
    ledger_events: int | None
    findings: list[str]


class HandoffBundle(msgspec.Struct, frozen=True, kw_only=True):
    summary: SessionSummary
    replay: list[ReplayLine]
    integrity: Integrity
    retrieval: MemoryCheckout
    skipped: int = 0  # messages on the session's subject that are not events (`eventloom.reading`)
    warnings: list[str] = msgspec.field(default_factory=list)


def digest(event: Event) -> str:
    """A short line of what the event says: its first telling payload field."""
    for name in DIGEST_FIELDS:
        value = event.payload.get(name)
        if isinstance(value, str) and value.strip():
            return clip(" ".join(value.split()), 60)
    return event.type


async def handoff_bundle(
    log: EventLog,
    memory: MemoryService,
    session: str,
    *,
    question: str | None = None,
    replay: int = DEFAULT_REPLAY,
    token_budget: int = DEFAULT_TOKEN_BUDGET,
    verify_wait_s: float = 5.0,
    after: Position | None = None,
) -> HandoffBundle:
    request = CheckoutRequest(
        text=question or HANDOFF_QUESTION, session=session, token_budget=token_budget, after=after
    )
    count, by_type, actors = 0, Counter[str](), dict[str, None]()
    first: Event | None = None
    tail: list[Event] = []
    reading = log.events(session)
    async for event in reading:
        count += 1
        first = first or event
        by_type[event.type] += 1
        actors[event.actor] = None
        tail = [*tail[-(replay - 1) :], event] if replay > 0 else []
    last = tail[-1] if tail else None
    summary = SessionSummary(
        session=session,
        events=count,
        first_ts=first.ts if first else None,
        last_ts=last.ts if last else None,
        last_seq=last.seq if last else 0,
        last_hash=last.hash if last else None,
        by_type=dict(by_type.most_common()),
        actors=list(actors),
    )
    return HandoffBundle(
        summary=summary,
        replay=[
            ReplayLine(seq=e.seq, ts=e.ts, type=e.type, actor=e.actor, digest=digest(e), citation=e.citation)
            for e in tail
        ],
        integrity=await _integrity(log, session, verify_wait_s),
        retrieval=await memory.checkout(request),
        skipped=reading.skipped,
        warnings=reading.warnings,
    )


async def _integrity(log: EventLog, session: str, wait_s: float) -> Integrity:
    keyring = await asyncio.to_thread(KeyStore(log.settings.data_dir).load_keyring)
    report = await verify_everything(
        log.client, log.layout, keyring, log.settings.ledger_dir, session=session, wait_s=wait_s
    )
    mine = [r for r in report.sessions if r.session == session]
    if not mine:
        return Integrity(ok=True, stream_events=0, ledger_events=0, findings=[])
    found = mine[0]
    return Integrity(
        ok=found.ok,
        stream_events=found.stream_events,
        ledger_events=found.ledger_events,
        findings=[f"{f.where} seq {f.seq}: {f.reason}" for f in found.findings],
    )
