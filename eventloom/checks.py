"""Checking many events' hashes and signatures at once, on background threads.

Ed25519 verification is the costliest step of mirroring and verifying; libsodium releases the GIL, so
threads verify in parallel. The threads run at a lower CPU priority: a catching-up mirror yields the CPU to
appends instead of slowing them down.
"""

from __future__ import annotations

import contextlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from eventloom.chain import ChainBreak, check_self
from eventloom.event import Event
from eventloom.keys import Keyring

_CHUNK = 64


def _lower_priority(niceness: int) -> None:
    with contextlib.suppress(OSError, AttributeError):  # per-thread niceness is Linux-only
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)


class EventChecker:
    """`check_all` answers, for each event, None or the ChainBreak that its own content raises."""

    def __init__(self, workers: int = 0, niceness: int = 19) -> None:
        count = workers or min(4, os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(
            max_workers=count,
            thread_name_prefix="event-check",
            initializer=_lower_priority,
            initargs=(niceness,),
        )

    def check_all(self, events: list[Event], keyring: Keyring) -> list[ChainBreak | None]:
        chunks = [events[start : start + _CHUNK] for start in range(0, len(events), _CHUNK)]
        results: list[ChainBreak | None] = []
        for chunk_result in self._pool.map(_check_chunk, chunks, [keyring] * len(chunks)):
            results.extend(chunk_result)
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def _check_chunk(events: list[Event], keyring: Keyring) -> list[ChainBreak | None]:
    results: list[ChainBreak | None] = []
    for event in events:
        try:
            check_self(event, keyring)
        except ChainBreak as exc:
            results.append(exc)
        else:
            results.append(None)
    return results
