"""`StageTimes`: where a pipeline's time goes, stage by stage (fetch, verify, extract, write ...).

Cheap enough to leave on in production (two clock reads per stage and batch), so that a benchmark, a status
page or an operator reads the same numbers. Stages may be timed from several threads (a store's writer
thread): each update is one dict assignment, atomic under the GIL.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class StageTimes:
    """Cumulative seconds and calls per stage name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.items: dict[str, int] = {}
        """Items (rows, events) a stage handled, where it counts them."""

    @contextlib.contextmanager
    def timed(self, stage: str, items: int = 0) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(stage, time.perf_counter() - started, items)

    def add(self, stage: str, seconds: float, items: int = 0) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + seconds
        self.calls[stage] = self.calls.get(stage, 0) + 1
        if items:
            self.items[stage] = self.items.get(stage, 0) + items

    def copy(self) -> StageTimes:
        copied = StageTimes()
        copied.seconds = dict(self.seconds)
        copied.calls = dict(self.calls)
        copied.items = dict(self.items)
        return copied

    def since(self, earlier: StageTimes) -> StageTimes:
        """What was spent after `earlier` (a `copy` taken before)."""
        spent = StageTimes()
        for stage, seconds in self.seconds.items():
            spent.seconds[stage] = seconds - earlier.seconds.get(stage, 0.0)
            spent.calls[stage] = self.calls[stage] - earlier.calls.get(stage, 0)
        for stage, items in self.items.items():
            spent.items[stage] = items - earlier.items.get(stage, 0)
        return spent

    def merged(self, other: StageTimes, prefix: str = "") -> StageTimes:
        """These stages and `other`'s (named `prefix` + stage)."""
        merged = self.copy()
        for stage, seconds in other.seconds.items():
            merged.seconds[prefix + stage] = seconds
            merged.calls[prefix + stage] = other.calls[stage]
        for stage, items in other.items.items():
            merged.items[prefix + stage] = items
        return merged

    def per_event_us(self, events: int) -> dict[str, float]:
        """Microseconds per event of each stage, largest first."""
        if events <= 0:
            return {}
        ordered = sorted(self.seconds.items(), key=lambda item: -item[1])
        return {stage: round(seconds / events * 1e6, 1) for stage, seconds in ordered}

    def items_per_event(self, events: int) -> dict[str, float]:
        """Items (rows written, say) per event of each stage that counts them."""
        if events <= 0:
            return {}
        return {stage: round(items / events, 3) for stage, items in sorted(self.items.items())}

    def __str__(self) -> str:
        """`fetch 0.12s (3 calls), apply 0.50s (3 calls)`: the stages, most time first."""
        ordered = sorted(self.seconds.items(), key=lambda item: -item[1])
        return ", ".join(f"{stage} {seconds:.2f}s ({self.calls[stage]} calls)" for stage, seconds in ordered)
