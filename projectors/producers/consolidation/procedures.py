"""Procedures: a sequence of commands and tool calls that led to success more than once -> `procedure`.

At a success marker (a passed `verification.recorded`, a `task.completed`, or a `session.ended` right after
a successful step) the steps since the previous marker are read back: successful `command.completed` and
`tool.call.completed` events, each normalised (a command to its program and subcommand), repeats of one step
folded. The last 2 to 6 steps are the sequence; the same sequence succeeding again, in any session, is a
recurrence (counted like a repeated claim, see `occurrences`).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Final

from eventloom.event import Event
from projectors.producers._common import fit
from projectors.producers.consolidation.occurrences import (
    PROPOSE_AT,
    Occurrence,
    Recorded,
    cited_once,
    family_key,
    record,
    sessions_of,
)
from projectors.producers.consolidation.proposal import Proposal, cite
from projectors.producers.consolidation.segments import SESSION_ENDED, gap_between
from projectors.producers.consolidation.summaries import Summary
from projectors.producers.consolidation.text import is_derived
from projectors.protocol import LogView

METHOD: Final = "procedure_repeated_success_v1"
MIN_STEPS: Final = 2
MAX_STEPS: Final = 6
TITLE_LIMIT: Final = 300
WINDOW: Final = 200  # events read back from a marker at most
STEP_TYPES: Final = ("command.completed", "tool.call.completed")
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBCOMMAND: Final = re.compile(r"^[a-z][a-z0-9_:-]*$")
_WRAPPERS: Final = frozenset({"sudo", "env", "time", "nohup", "exec"})


def normalise_command(command: str) -> str:
    """`program subcommand` of a shell command's first part: `git commit -m x && ...` -> `git commit`,
    `FOO=1 sudo /usr/bin/make test` -> `make test`, `python -m pytest -q` -> `python -m pytest`."""
    first = re.split(r"&&|\|\||;|\|", command, maxsplit=1)[0]
    try:
        words = shlex.split(first)
    except ValueError:
        words = first.split()
    words = [w for w in words if not _ASSIGNMENT.match(w)]
    while words and words[0] in _WRAPPERS:
        words = words[1:]
    if not words:
        return ""
    program = os.path.basename(words[0])
    rest = words[1:]
    if len(rest) >= 2 and rest[0] == "-m":
        return f"{program} -m {rest[1]}"
    if rest and _SUBCOMMAND.fullmatch(rest[0]):
        return f"{program} {rest[0]}"
    return program


def step_name(event: Event) -> str | None:
    """The normalised step a successful command or tool call is; None for anything else or a failure."""
    payload = event.payload
    if event.type == "command.completed":
        command = payload.get("command")
        if payload.get("exit_code") == 0 and isinstance(command, str):
            return normalise_command(command) or None
    elif event.type == "tool.call.completed":
        tool = payload.get("tool")
        if payload.get("ok") is True and isinstance(tool, str) and tool:
            return f"tool:{tool}"
    return None


def is_marker(event: Event) -> bool:
    """A success marker by itself (`session.ended` counts only after a successful step: see `steps`)."""
    if event.type == "verification.recorded":
        return event.payload.get("passed") is True
    return event.type == "task.completed"


@dataclass(frozen=True)
class Step:
    name: str
    event: Event


def steps_before(events: list[Event], gap_s: float) -> list[Step]:
    """The folded successful steps after the last marker (or long pause) in `events`, the last 6 at most."""
    steps: list[Step] = []
    for event in _since_last_boundary(events, gap_s):
        name = step_name(event)
        if name is None:
            continue
        if steps and steps[-1].name == name:
            steps[-1] = Step(name, event)  # a step repeated (a retry) counts once, as its last run
        else:
            steps.append(Step(name, event))
    return steps[-MAX_STEPS:]


def _since_last_boundary(events: list[Event], gap_s: float) -> list[Event]:
    """The events after the last success marker, or from the first event after the last long pause."""
    for index in range(len(events) - 1, -1, -1):
        if is_marker(events[index]):
            return events[index + 1 :]
        if index > 0 and gap_between(events[index - 1], events[index]) > gap_s:
            return events[index:]
    return events


async def procedure_proposals(event: Event, log: LogView, gap_s: float) -> list[Proposal]:
    """At a success marker: records the sequence that led to it; proposes at its 2nd, 5th, 25th success."""
    if not (is_marker(event) or event.type == SESSION_ENDED):
        return []
    before = await log.session_events(event.session, max(0, event.seq - 1 - WINDOW), event.seq - 1)
    content = [e for e in before if not is_derived(e) and e.type != SESSION_ENDED]
    if event.type == SESSION_ENDED and (not content or step_name(content[-1]) is None):
        return []  # a session that ended on a failure, or on something else, succeeded at nothing
    steps = steps_before(content, gap_s)
    if len(steps) < MIN_STEPS:
        return []
    sequence = tuple(step.name for step in steps)
    occurrence = Occurrence(id=event.hash, cited=[*(cite(step.event) for step in steps), cite(event)])
    recorded = await record(log.state, family_key("procedure", sequence), occurrence)
    if recorded is None or recorded.ordinal not in PROPOSE_AT:
        return []
    return [_proposal(sequence, recorded)]


def _proposal(sequence: tuple[str, ...], recorded: Recorded) -> Proposal:
    count, sessions = recorded.ordinal, sessions_of(recorded.occurrences)
    where = f"in {sessions} sessions" if sessions > 1 else "in one session"
    arrow = " \u2192 ".join(sequence)
    numbered = "; ".join(f"{i}. {name}" for i, name in enumerate(sequence, start=1))
    return Proposal(
        candidate_type="procedure",
        cited=cited_once(recorded.occurrences),
        texts=sequence,
        summary=Summary(
            title=fit(f"Procedure: {arrow}", TITLE_LIMIT),
            summary=f"Led to success {count} times {where}: {numbered}.",
        ),
        # Two successes may be coincidence; five and more look like the way this is done.
        confidence={2: 0.65, 5: 0.8}.get(count, 0.85),
        method=METHOD,
        purpose=f"A reusable {len(sequence)}-step procedure instead of {count} separate runs of it.",
    )
