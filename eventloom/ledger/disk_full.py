"""A ledger that cannot grow: its disk is full, a quota is reached, or a file-size limit (RLIMIT_FSIZE).

The mirror then acknowledges nothing (the events stay in the stream, unacknowledged), says why where a user
looks (the log, `eventloom status` and `health`, `<ledger>/incidents.log`) and tries the same batch again,
waiting 0.5, 1, 2, 4, then every 5 seconds, until it can write: at most 5 s after space returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

from eventloom.ledger.files import record_incident

DISK_FULL: Final = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})
RETRY_S: Final = (0.5, 1.0, 2.0, 4.0, 5.0)
"""Waits between tries: bounded exponential, then every 5 s for as long as it takes."""

TroubleListener = Callable[[str | None, float | None], Awaitable[None]]
"""Hears why the mirror cannot go on (and when it tries again), and `None` once it can."""

log = logging.getLogger(__name__)


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL


class DiskFullWatch:
    """How the mirror fares while it cannot write: `failed` after each try that could not, `written` after
    one that could."""

    def __init__(self, ledger_dir: Path, on_trouble: TroubleListener | None = None) -> None:
        self._ledger_dir = ledger_dir
        self._on_trouble = on_trouble
        self._since: float | None = None
        self.tries = 0
        self.episodes = 0

    @property
    def full(self) -> bool:
        return self._since is not None

    async def failed(self, error: OSError, cut_back: int) -> float:
        """Say why, once as an error and an incident, then at each retry; returns how long to wait."""
        wait = RETRY_S[min(self.tries, len(RETRY_S) - 1)]
        self.tries += 1
        name = errno.errorcode.get(error.errno or 0, str(error.errno))
        what = (
            f"the ledger cannot be written: {error.strerror} ({name}: a full disk, a quota or a file-size "
            f"limit); the mirror acknowledges nothing until it can, next try in {wait:g}s; free space under "
            f"{self._ledger_dir}"
        )
        if self._since is None:
            self._since = time.monotonic()
            self.episodes += 1
            log.error("ledger mirror: %s (%d partly written bytes cut back)", what, cut_back)
            await self._incident(f"{what} (started)")
        else:
            log.warning("ledger mirror: still cannot write (try %d): %s", self.tries, error.strerror)
        if self._on_trouble is not None:
            await self._on_trouble(what, wait)
        return wait

    async def written(self) -> None:
        if self._since is None:
            return
        took = time.monotonic() - self._since
        self._since, self.tries = None, 0
        log.warning("ledger mirror: writing again after %.1fs; the events it held back follow", took)
        await self._incident(f"the ledger is written again after {took:.1f}s; nothing was lost (ended)")
        if self._on_trouble is not None:
            await self._on_trouble(None, None)

    async def _incident(self, what: str) -> None:
        with contextlib.suppress(OSError):  # on a full disk the incident log may not be writable either
            await asyncio.to_thread(record_incident, self._ledger_dir, what)
