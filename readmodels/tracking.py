"""The one checkpoint contract every read model keeps: `TrackingRecorder`.

Like the `eventsourcing` library's tracking recorder, a store that projects the log records, in the same
transaction as what it writes, the position it reached: here the last seq applied per (projector,
session). Applying a batch twice is then harmless (what is at or below the checkpoint is skipped), and a
projector resumes from `applied_seqs` after any crash. Every store implements it, on every backend: the
graph (`EventProjection`s), the keyword and vector models (`EventDocs`), the inferred-edge model
(`EventChanges`); `projectors.tracking.TrackingProjector` drives any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

Item_contra = TypeVar("Item_contra", contravariant=True)


class Applied(Protocol):
    """What a batch item needs for exactly-once: its event's place in the log."""

    @property
    def session(self) -> str: ...

    @property
    def seq(self) -> int: ...

    @property
    def event_hash(self) -> str: ...


@runtime_checkable
class TrackingRecorder(Protocol[Item_contra]):
    """A store that writes a batch together with the last seq it applied per (projector, session)."""

    async def open(self) -> None:
        """Connect, create or migrate what is missing (idempotent)."""
        ...

    async def close(self) -> None: ...

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        """The last seq `projector` applied per session (sessions never applied are absent)."""
        ...

    async def apply(self, projector: str, batch: Sequence[Item_contra]) -> int:
        """Write a batch and the per-(projector, session) checkpoint in ONE transaction; items at or below
        the checkpoint are skipped, and within a session the batch is in seq order. Returns how many were
        applied. On any error nothing of the batch is written."""
        ...


@runtime_checkable
class Housekeeping(Protocol):
    """A store with work best done when nothing waits to be written (LadybugDB folds its WAL then)."""

    async def idle(self) -> None: ...


A = TypeVar("A", bound=Applied)


def past_checkpoints(applied: dict[str, int], batch: Sequence[A]) -> list[A]:
    """The items of `batch` past their session's checkpoint in `applied`, in order; `applied` moves along
    as items are taken, so an item repeated in the batch is taken once."""
    todo: list[A] = []
    for item in batch:
        if item.seq > applied.get(item.session, 0):
            applied[item.session] = item.seq
            todo.append(item)
    return todo
