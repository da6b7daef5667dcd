"""Roles kept running in one process: a role that fails restarts with a growing backoff, and how each fares
(running, or failing with its last error) is there for `status`, `health` and `/healthz` to show.

A role is `failing` from its failure until it has run `stable_s` again without failing; only then does its
backoff start over, so a role that fails on every start backs off to `max_retry_s` and stays visible."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping

import msgspec

from eventloom.event import utc_timestamp
from eventloom.runtime import RoleState

Role = Callable[[], Awaitable[None]]
StateListener = Callable[[], Awaitable[None]]

log = logging.getLogger(__name__)
_ERROR_CHARS = 500


class RoleSupervisor:
    """Runs roles until `stop`; `states` says how each fares, `on_change` hears of every change."""

    def __init__(
        self,
        *,
        on_change: StateListener | None = None,
        first_retry_s: float = 0.5,
        max_retry_s: float = 30.0,
        stable_s: float = 30.0,
    ) -> None:
        self.states: dict[str, RoleState] = {}
        self._troubled: set[str] = set()  # roles that said they cannot go on, without failing
        self._on_change = on_change
        self._first_retry_s = first_retry_s
        self._max_retry_s = max_retry_s
        self._stable_s = stable_s

    def failing(self) -> dict[str, RoleState]:
        return {name: s for name, s in self.states.items() if s.state == "failing"}

    def reporter(self, name: str) -> Callable[[str | None, float | None], Awaitable[None]]:
        """For a role that waits out trouble itself (a read model that is down) instead of failing: it says
        why it cannot go on and when it tries again, and `None` once it can."""

        async def report(trouble: str | None, retry_in_s: float | None) -> None:
            previous = self.states.get(name, RoleState())
            if trouble is None:
                self._troubled.discard(name)
                self.states[name] = msgspec.structs.replace(previous, state="running", retry_in_s=None)
            else:
                since = previous.failed_at if name in self._troubled else utc_timestamp()
                self._troubled.add(name)
                error = trouble[:_ERROR_CHARS]
                self.states[name] = msgspec.structs.replace(
                    previous, state="failing", last_error=error, failed_at=since, retry_in_s=retry_in_s
                )
            await self._changed()

        return report

    async def run(self, roles: Mapping[str, Role], stop: asyncio.Event) -> None:
        """Run every role until `stop`; then give each 15 s to finish the batch in hand."""
        for name in roles:
            self.states[name] = RoleState()
        await self._changed()
        tasks = {asyncio.create_task(self._keep_running(n, r, stop), name=n) for n, r in roles.items()}
        await stop.wait()
        _, running = await asyncio.wait(tasks, timeout=15)
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _keep_running(self, name: str, role: Role, stop: asyncio.Event) -> None:
        retry_s = self._first_retry_s
        while not stop.is_set():
            attempt: asyncio.Future[None] = asyncio.ensure_future(role())
            try:
                await asyncio.wait_for(asyncio.shield(attempt), timeout=self._stable_s)
            except TimeoutError:
                await self._recovered(name)
                retry_s = self._first_retry_s
                error = await _failure_of(attempt)
            except asyncio.CancelledError:
                attempt.cancel()
                raise
            except Exception as exc:
                error = exc
            else:
                error = None
            if error is None or stop.is_set():
                continue  # a role that returns before `stop` (e.g. nothing to do) is simply run again
            await self._failed(name, error, retry_s)
            await _sleep_until(stop, retry_s)
            retry_s = min(retry_s * 2, self._max_retry_s)

    async def _failed(self, name: str, error: BaseException, retry_s: float) -> None:
        log.error("%s failed; restarting in %.1fs", name, retry_s, exc_info=error)
        self._troubled.discard(name)
        previous = self.states.get(name, RoleState())
        self.states[name] = RoleState(
            state="failing",
            restarts=previous.restarts + 1,
            last_error=_said(error)[:_ERROR_CHARS],
            failed_at=utc_timestamp(),
            retry_in_s=retry_s,
        )
        await self._changed()

    async def _recovered(self, name: str) -> None:
        previous = self.states.get(name, RoleState())
        if previous.state == "failing" and name not in self._troubled:
            log.info("%s has run %.0fs without failing again", name, self._stable_s)
            self.states[name] = msgspec.structs.replace(previous, state="running", retry_in_s=None)
            await self._changed()

    async def _changed(self) -> None:
        if self._on_change is not None:
            try:
                await self._on_change()
            except Exception:  # telling the world is best effort; the roles go on
                log.exception("could not record the roles' states")


def _said(error: BaseException) -> str:
    """What failed, in a line: the error itself, not the task group a role ran it in (a role's `TaskGroup`
    wraps whatever failed inside it in an `ExceptionGroup`, which says only that something did)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


async def _failure_of(attempt: asyncio.Future[None]) -> BaseException | None:
    """Wait for an attempt that outlived the stable window; its failure, or None if it ended cleanly."""
    try:
        await attempt
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return exc
    return None


async def _sleep_until(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
