"""`sort_batch`: the runner's ordering rule against the read model's checkpoints."""

from __future__ import annotations

from typing import cast

from nats.aio.msg import Msg

from projectors.batches import CheckedBatch, FetchedEvent, sort_batch
from tests.test_graph_support import SessionLog


def batch(*seqs: int, refused: frozenset[int] = frozenset()) -> CheckedBatch:
    log = SessionLog("s")
    for n in range(max(seqs)):
        log.add("note.added", {"text": f"note {n}"})
    items = [FetchedEvent(cast(Msg, None), log.events[seq - 1]) for seq in seqs]
    return CheckedBatch(items, [("unverified: forged" if seq in refused else None) for seq in seqs])


def seqs(items: list[FetchedEvent]) -> list[int]:
    return [item.event.seq for item in items]


def test_applied_events_are_acknowledged_and_the_rest_apply_in_order() -> None:
    sorted_batch = sort_batch(batch(2, 3, 4, 5), {"s": 3}, set())
    assert seqs(sorted_batch.applied_already) == [2, 3] and seqs(sorted_batch.ready) == [4, 5]
    assert not sorted_batch.waiting and not sorted_batch.refused


def test_an_event_waits_behind_a_missing_predecessor_unless_it_was_dead_lettered() -> None:
    assert seqs(sort_batch(batch(3, 4), {"s": 1}, set()).waiting) == [3, 4]
    assert seqs(sort_batch(batch(3, 4), {"s": 1}, {("s", 2)}).ready) == [3, 4]
    assert seqs(sort_batch(batch(3, 4), {"s": 1}, set(), in_order=False).ready) == [3, 4]  # producers


def test_a_refused_event_is_not_applied_and_does_not_hold_back_the_batch() -> None:
    sorted_batch = sort_batch(batch(1, 2, 3, refused=frozenset({2})), {}, set())
    assert seqs(sorted_batch.ready) == [1, 3]
    assert [(item.event.seq, reason) for item, reason in sorted_batch.refused] == [(2, "unverified: forged")]
