"""An append load in its own process, as agents are in production; used by bench/project.py.

Appends realistic events to `--sessions` sessions, at full speed (`--events N`) or at a steady `--rate` for
`--seconds`. On stdout, one JSON line per sampled batch, `{"session", "seq", "acked"}`, where `acked` is
`time.monotonic()` at the ack (the same clock in every process of the machine), then one summary line
`{"appended", "seconds"}`. Keeping the appender's hashing, signing and publishing out of the projector's
process is what makes the projector's numbers its own.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings

CHUNK = 500


def realistic(session: str, n: int) -> AppendRequest:
    """A mix like an agent session's: facts with relations, tasks, decisions, commands, turns."""
    kind = n % 5
    task = f"t{n // 25}"
    payload: dict[str, Any]
    if kind == 0:
        payload = {
            "entities": [
                {"name": f"svc-{n % 40}", "entity_type": "service", "summary": f"rev {n // 40}"},
                {"name": f"team-{n % 7}", "entity_type": "team", "summary": "owners"},
            ],
            "relations": [
                {"source": f"svc-{n % 40}", "target": f"team-{n % 7}", "relation_type": "owned_by"}
            ],
        }
        return AppendRequest(session=session, type="memory.fact.asserted", actor="agent", payload=payload)
    if kind == 1:
        payload = {"task_id": task, "title": f"Task {task}", "goal_id": "g1"}
        return AppendRequest(session=session, type="task.proposed", actor="agent", payload=payload)
    if kind == 2:
        payload = {"decision_id": f"d{n}", "title": f"Decision {n}", "rationale": "measured", "task_id": task}
        return AppendRequest(session=session, type="decision.made", actor="agent", payload=payload)
    if kind == 3:
        payload = {"command": f"pytest -k case{n}", "exit_code": 0, "output": "ok " * 20, "task_id": task}
        return AppendRequest(session=session, type="command.completed", actor="agent", payload=payload)
    payload = {"role": "assistant", "text": f"Turn {n}: working on {task}. " * 4}
    return AppendRequest(session=session, type="transcript.turn", actor="agent", payload=payload)


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(msgspec.json.encode(record).decode() + "\n")
    sys.stdout.flush()


async def full_speed(log: EventLog, sessions: list[str], per_session: int) -> int:
    async def write(session: str) -> None:
        for start in range(0, per_session, CHUNK):
            chunk = [realistic(session, n) for n in range(start, min(start + CHUNK, per_session))]
            events = await log.append_many(chunk)
            emit({"session": session, "seq": events[-1].seq, "acked": time.monotonic()})

    await asyncio.gather(*(write(session) for session in sessions))
    return per_session * len(sessions)


async def steady(log: EventLog, sessions: list[str], rate: int, seconds: float, sample_every: int) -> int:
    interval = 0.05
    per_tick = max(1, int(rate * interval))
    started = time.monotonic()
    appended = tick = 0
    while time.monotonic() - started < seconds:
        began = time.monotonic()
        session = sessions[tick % len(sessions)]
        events = await log.append_many([realistic(session, appended + i) for i in range(per_tick)])
        appended += len(events)
        if tick % sample_every == 0:
            emit({"session": session, "seq": events[-1].seq, "acked": time.monotonic()})
        tick += 1
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))
    return appended


async def run(args: argparse.Namespace) -> None:
    log = await EventLog.open(Settings(data_dir=args.data_dir, nats_url=args.nats_url))
    sessions = [f"{args.prefix}-{i}" for i in range(args.sessions)]
    started = time.monotonic()
    try:
        if args.rate:
            appended = await steady(log, sessions, args.rate, args.seconds, args.sample_every)
        else:
            appended = await full_speed(log, sessions, args.events // args.sessions)
    finally:
        await log.close()
    emit({"appended": appended, "seconds": time.monotonic() - started})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="the node's data directory (for keys)")
    parser.add_argument("--nats-url", required=True)
    parser.add_argument("--prefix", default="load", help="session name prefix")
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--events", type=int, default=20_000, help="events at full speed (without --rate)")
    parser.add_argument("--rate", type=int, default=0, help="events/s to sustain (0: full speed)")
    parser.add_argument("--seconds", type=float, default=8.0, help="how long to sustain --rate")
    parser.add_argument("--sample-every", type=int, default=4, help="report every Nth batch of a steady load")
    asyncio.run(run(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
