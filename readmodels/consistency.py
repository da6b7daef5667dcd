"""Reading your own writes: a read given `after` (an `eventloom.Position`) waits, boundedly, until the read
models it uses have applied that event.

Every read model keeps the last seq it applied per session (`readmodels.tracking`), so "has it applied
`s1/42`" is one `applied_seqs` call, the same on every backend. The wait polls it with a short growing
backoff: projectors may run in other processes (a Neo4j deployment), where no in-process notification
would reach. Past the wait the read still answers, and its `Consistency` names the read models that lag and
by how much.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, Protocol, runtime_checkable

import msgspec

from eventloom.position import Position

DEFAULT_AFTER_WAIT_MS: Final = 2000
MAX_AFTER_WAIT_MS: Final = 10_000
"""Well under the query clients' own timeout (30 s): a read that waits longer gets no answer at all."""
FIRST_POLL_S: Final = 0.005
LONGEST_POLL_S: Final = 0.05
"""A projector that has caught up applies a fresh event within a few tens of milliseconds: polls start at
5 ms and double up to 50 ms, so a read waits little past the apply and a lagging model is asked ~20 times
a second, not more."""


Hurry = Callable[[Collection[str]], None]
"""Tells the named read models' projectors that a reader waits on them: they apply what they hold at once,
without lingering for a larger batch (`DurableConsumer.hurry`). Only projectors in the reader's process
can be told; others are waited for all the same."""


@runtime_checkable
class Progress(Protocol):
    """A read model's progress through the log: what every built-in projector offers."""

    @property
    def skipped_sessions(self) -> frozenset[str]:
        """Sessions this read model never applies (nothing of theirs is waited for)."""
        ...

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]: ...


class Lag(msgspec.Struct, frozen=True, kw_only=True):
    applied_seq: int
    """The last seq of the session this read model had applied when the read was answered (0: none)."""
    behind: int
    """How many events of the session it still had to apply to reach `after`."""


class Consistency(msgspec.Struct, frozen=True, kw_only=True):
    """How a read given `after` was answered: how long it waited, and which read models still lagged."""

    after: Position
    waited_ms: float
    lagging: dict[str, Lag] = msgspec.field(default_factory=dict)

    def warning(self) -> str | None:
        """A sentence for a result's `warnings` when some read model lagged, else None."""
        if not self.lagging:
            return None
        models = ", ".join(
            f"{name} (at seq {lag.applied_seq}, {lag.behind} behind)" for name, lag in self.lagging.items()
        )
        return (
            f"after {self.after.text}: not yet applied by {models} after waiting {self.waited_ms:.0f} ms; "
            "this answer may miss the latest events"
        )


def after_wait_problem(wait_ms: int) -> str | None:
    """What is wrong with a request's `after_wait_ms` (the message names the field), or None."""
    if not 0 <= wait_ms <= MAX_AFTER_WAIT_MS:
        return f"after_wait_ms: must be between 0 and {MAX_AFTER_WAIT_MS}, got {wait_ms}"
    return None


async def wait_applied(
    after: Position, models: Mapping[str, Progress], wait_ms: int, hurry: Hurry | None = None
) -> Consistency:
    """Wait until every read model in `models` has applied `after`, or `wait_ms` has passed; say which
    lagged then. A read model that skips `after`'s session has nothing to apply. Those that lag are
    hurried at each poll: the event may reach their projector only after the first."""
    started = time.monotonic()
    deadline = started + wait_ms / 1000
    waiting = {name: model for name, model in models.items() if after.session not in model.skipped_sessions}
    lagging: dict[str, Lag] = {}
    pause = FIRST_POLL_S
    while True:
        lagging = await _lagging(after, waiting)
        remaining = deadline - time.monotonic()
        if not lagging or remaining <= 0:
            break
        if hurry is not None:
            hurry(lagging.keys())
        waiting = {name: waiting[name] for name in lagging}
        await asyncio.sleep(min(pause, remaining))
        pause = min(pause * 2, LONGEST_POLL_S)
    return Consistency(after=after, waited_ms=round((time.monotonic() - started) * 1000, 1), lagging=lagging)


async def _lagging(after: Position, models: Mapping[str, Progress]) -> dict[str, Lag]:
    names = list(models)
    applied = await asyncio.gather(*(models[name].applied_seqs([after.session]) for name in names))
    lagging: dict[str, Lag] = {}
    for name, seqs in zip(names, applied, strict=True):
        seq = seqs.get(after.session, 0)
        if seq < after.seq:
            lagging[name] = Lag(applied_seq=seq, behind=after.seq - seq)
    return lagging
