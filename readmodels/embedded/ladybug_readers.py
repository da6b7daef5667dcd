"""`LadybugReaders`: the reader threads of one LadybugDB database, each with its own connection.

The engine runs read transactions of different connections at once and releases the GIL while it does, so
several readers answer several questions at once: with one, every graph read of every question queued
behind the others (at 10 questions/s on 50,000 events, the exact lane's median went from 8 ms to 41 ms and
the traversal's from 44 ms to 114 ms, and the answers fell behind the askers). Reads go to whichever
reader is free.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

import ladybug

from readmodels.graph.protocol import GraphStoreError

T = TypeVar("T")
DEFAULT_READERS: Final = 4
"""As many as the query service answers questions at once (`ServingLimits.concurrency`)."""


class LadybugReaders:
    """`count` threads reading the database `database()` returns, each on its own connection, opened on
    its first read and closed when the readers are `held` (so that the database may be closed) or closed."""

    def __init__(self, database: Callable[[], ladybug.Database | None], count: int = DEFAULT_READERS) -> None:
        if count < 1:
            raise ValueError(f"readers: at least 1, not {count}")
        self._database = database
        self._count = count
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None

    def start(self) -> None:
        self._pool = ThreadPoolExecutor(self._count, thread_name_prefix="ladybug-read")

    def connection(self) -> ladybug.Connection:
        """This reader thread's connection (only in a function `run` runs)."""
        connection: ladybug.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            database = self._database()
            if database is None:
                raise GraphStoreError("the graph store is not open")
            connection = ladybug.Connection(database)
            self._local.connection = connection
        return connection

    async def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on the first free reader thread."""
        if self._pool is None:
            raise GraphStoreError("the graph store is not open")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Every reader closes its connection, then waits, and every read queued meanwhile with it, until
        the block ends: the block may close and reopen the database; reads then reconnect."""
        if self._pool is None:
            yield
            return
        loop = asyncio.get_running_loop()
        arrivals = [loop.create_future() for _ in range(self._count)]
        resume = threading.Event()

        def hold(arrived: asyncio.Future[None]) -> None:
            # each job blocks its thread until `resume`, so the `count` jobs hold `count` distinct threads
            try:
                self._disconnect()
            finally:
                loop.call_soon_threadsafe(arrived.set_result, None)
            resume.wait()

        jobs = [loop.run_in_executor(self._pool, hold, arrived) for arrived in arrivals]
        try:
            await asyncio.gather(*arrivals)
            yield
        finally:
            resume.set()
            await asyncio.gather(*jobs)

    async def close(self) -> None:
        """Close every connection, then the threads (reads already queued are answered first)."""
        if self._pool is None:
            return
        async with self.held():
            pool, self._pool = self._pool, None
        pool.shutdown(wait=False)  # idle: every thread's last job was awaited

    def _disconnect(self) -> None:
        connection: ladybug.Connection | None = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None
