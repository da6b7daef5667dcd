"""The plug-in contracts: a `Projector` builds a read model; a `Producer` derives new events.

Both are small on purpose. The runtime (`projectors.runner`) owns everything else: the durable consumer,
batching, ordering per session, retries, dead letters, checkpoints and the fences that make a derived event
appear once, ever.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from eventloom.event import Event
from eventloom.stages import StageTimes
from projectors.generations import Generations


@runtime_checkable
class Projector(Protocol):
    """Applies events to a read model, exactly once in effect.

    `apply` receives a batch in stream order (so in seq order within each session), never an event at or
    below the seq `applied_seqs` reports for its session. It must record the new applied seq per session in
    the same write (transaction) as the projection itself: that is what makes redelivery harmless.
    """

    name: str

    async def open(self) -> None: ...

    async def applied_seqs(self, sessions: Sequence[str]) -> dict[str, int]:
        """The last applied seq of each given session (absent or 0: nothing applied yet)."""
        ...

    async def apply(self, events: Sequence[Event]) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class SkipsSessions(Protocol):
    """A projector that never sees some sessions: the runner acknowledges their events without applying
    them (the built-in memory models skip the gateway's audit session: tool calls are not memory)."""

    skipped_sessions: frozenset[str]


@runtime_checkable
class Idles(Protocol):
    """A projector told when its runner has nothing to apply (a moment for the store's housekeeping)."""

    async def idle(self) -> None: ...


@runtime_checkable
class Profiled(Protocol):
    """A projector that reports where its time goes (extract, write, and its store's own stages)."""

    def stage_times(self) -> StageTimes: ...


@runtime_checkable
class Rebuildable(Protocol):
    """A projector rebuilt into a new generation, then swapped in (see projectors.generations).

    The runner notices a swap, reopens the projector on the new generation and continues from the stream
    sequence the rebuild recorded.
    """

    generations: Generations
    generation: int


@runtime_checkable
class Answers(Protocol):
    """A projector that answers questions about its read model.

    The node process that runs it serves NATS request/reply on `eventloom.q.<projector name>.<question>`
    (queue group `<projector name>`) once it is ready, always against its live store; clients ask through
    `readmodels.query.answers.ask`. `body` is the question's JSON; a bad question (unknown name, a field
    that does not fit) raises a `ValueError` whose message names the field, and the asker gets it as
    `invalid_input`. The answer is anything msgspec encodes.
    """

    async def answer(self, question: str, body: bytes) -> Any: ...


class CitedEvent(msgspec.Struct, frozen=True):
    """An event a derivation relies on: it must exist at `seq` in `session` with exactly this hash."""

    session: str
    seq: int
    hash: str


class DerivedEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What a producer asks the runtime to append; `caused_by` gets the source event's hash added.

    `requires` lists cited events the runtime checks against the log before appending: if one is missing
    or its hash differs, nothing is emitted. That keeps `derive` pure while citations stay honest.
    """

    type: str
    payload: dict[str, Any]
    session: str | None = None  # default: the source event's session
    actor: str | None = None  # default: "producer:<name>"
    key: str = ""  # distinguishes several derivations from one source event
    requires: list[CitedEvent] = msgspec.field(default_factory=list)


class LogView(Protocol):
    """What a `ProcessProducer` may read: earlier events of the log, and a small state of its own.

    The log is immutable, so what a producer derives from the events before its source event is the same
    whenever it runs; `state` is for what spans sessions (a fact seen before, a sequence seen twice).
    """

    async def event(self, session: str, seq: int) -> Event | None:
        """The session's event at `seq` (verified against its chain), or None."""
        ...

    async def session_events(self, session: str, after_seq: int, upto_seq: int) -> list[Event]:
        """The session's events with `after_seq < seq <= upto_seq`, in seq order."""
        ...

    @property
    def state(self) -> ProducerState: ...


class ProducerState(Protocol):
    """A key-value store private to one producer (keys: `[A-Za-z0-9_=-]`, at most 200 characters)."""

    async def get(self, key: str) -> bytes | None: ...

    async def create(self, key: str, value: bytes) -> bool:
        """Store `value` unless `key` exists; True when this call created it (one winner across workers)."""
        ...

    async def put(self, key: str, value: bytes) -> None: ...


@runtime_checkable
class ProcessProducer(Protocol):
    """A producer that reads the log to derive (eventsourcing's process application): an episode spans many
    events, a repeated claim many sessions. Deterministic given the log before the source event (and its own
    state); the runtime appends, fences and cites exactly as for a `Producer`."""

    name: str

    async def process(self, event: Event, log: LogView) -> list[DerivedEvent]: ...


@runtime_checkable
class Producer(Protocol):
    """Derives new events from one event: pure, deterministic, no I/O.

    The runtime appends what `derive` returns with `caused_by=[source hash]` and fences each derivation so
    it is emitted once, ever, even across restarts. Replays and rebuilds never call producers.
    """

    name: str

    def derive(self, event: Event) -> list[DerivedEvent]: ...
