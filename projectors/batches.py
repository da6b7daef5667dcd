"""A fetched batch on its way to a read model: decoded, verified, then sorted against the checkpoints.

`sort_batch` is the runner's one ordering rule, pure: an event at or below its session's checkpoint was
applied already (acknowledge it); one whose predecessor is neither applied nor dead-lettered must wait
(redeliver it later); the rest are applied, in stream order, unless they failed verification (refused).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from nats.aio.msg import Msg

from eventloom.event import Event


@dataclass
class FetchedEvent:
    message: Msg
    event: Event


@dataclass
class CheckedBatch:
    """A decoded batch and each event's verdict (None: it may be applied; else why not)."""

    items: list[FetchedEvent]
    verdicts: list[str | None]


@dataclass
class SortedBatch:
    applied_already: list[FetchedEvent] = field(default_factory=list)
    waiting: list[FetchedEvent] = field(default_factory=list)
    """Behind a predecessor that is still pending."""
    ready: list[FetchedEvent] = field(default_factory=list)
    refused: list[tuple[FetchedEvent, str]] = field(default_factory=list)


def sort_batch(
    checked: CheckedBatch,
    applied: Mapping[str, int],
    dead_lettered: Collection[tuple[str, int]],
    *,
    in_order: bool = True,
) -> SortedBatch:
    """Sort `checked` against the applied seq per session and the (session, seq) pairs dead-lettered.

    Order is checked against the read model's own checkpoint, so it holds across restarts too: an event is
    applied only after its predecessor was applied or dead-lettered. Producers (`in_order=False`) are fenced
    per derivation and take events in any order.
    """
    sorted_batch = SortedBatch()
    expected: dict[str, int] = {}
    for item, verdict in zip(checked.items, checked.verdicts, strict=True):
        event = item.event
        applied_seq = applied.get(event.session, 0)
        if event.seq <= applied_seq:
            sorted_batch.applied_already.append(item)
            continue
        next_seq = expected.get(event.session, applied_seq + 1)
        if in_order and not all((event.session, s) in dead_lettered for s in range(next_seq, event.seq)):
            sorted_batch.waiting.append(item)
            continue
        expected[event.session] = event.seq + 1
        if verdict is None:
            sorted_batch.ready.append(item)
        else:
            sorted_batch.refused.append((item, verdict))
    return sorted_batch
