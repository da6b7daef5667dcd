"""Roles that fail restart with a growing backoff, and say so (issue 17, defect 2): unit tests of the
supervisor with real asyncio tasks; tests/test_role_health.py shows the same through a real node."""

from __future__ import annotations

import asyncio

import pytest

from eventloom.runtime import RoleState
from gateway.supervisor import RoleSupervisor

pytestmark = pytest.mark.anyio


async def _until(condition: object, timeout: float = 5.0) -> None:
    assert callable(condition)
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_a_role_that_always_fails_backs_off_and_shows_its_last_error() -> None:
    seen: list[RoleState] = []

    async def record() -> None:  # the listener hears every change, as the node's runtime file does
        if "broken" in supervisor.states:
            seen.append(supervisor.states["broken"])

    supervisor = RoleSupervisor(on_change=record, first_retry_s=0.02, max_retry_s=0.08, stable_s=5.0)
    attempts = 0

    async def broken() -> None:
        nonlocal attempts
        attempts += 1
        raise RuntimeError(f"cannot open the store (attempt {attempts})")

    stop = asyncio.Event()

    async def fine() -> None:
        await stop.wait()

    task = asyncio.create_task(supervisor.run({"broken": broken, "fine": fine}, stop))
    await _until(lambda: supervisor.states.get("broken", RoleState()).restarts >= 5)
    stop.set()
    await asyncio.wait_for(task, 5)

    failing = [s for s in seen if s.state == "failing"]
    assert [s.retry_in_s for s in failing[:5]] == [0.02, 0.04, 0.08, 0.08, 0.08]
    assert [s.restarts for s in failing[:5]] == [1, 2, 3, 4, 5]
    last = supervisor.states["broken"]
    assert last.state == "failing" and last.failed_at
    assert last.last_error == f"RuntimeError: cannot open the store (attempt {last.restarts})"
    assert set(supervisor.failing()) == {"broken"}
    assert supervisor.states["fine"] == RoleState()


async def test_a_role_that_recovers_is_running_again_after_the_stable_window() -> None:
    supervisor = RoleSupervisor(first_retry_s=0.01, stable_s=0.2)
    failures = 0

    async def flaky(stop: asyncio.Event) -> None:
        nonlocal failures
        if failures < 2:
            failures += 1
            raise ConnectionError("nats restarting")
        await stop.wait()

    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run({"flaky": lambda: flaky(stop)}, stop))
    await _until(lambda: supervisor.states.get("flaky", RoleState()).restarts == 2)
    assert supervisor.failing()["flaky"].last_error == "ConnectionError: nats restarting"
    await _until(lambda: not supervisor.failing(), timeout=3)
    recovered = supervisor.states["flaky"]
    assert recovered.state == "running" and recovered.restarts == 2 and recovered.retry_in_s is None
    assert recovered.last_error == "ConnectionError: nats restarting"  # kept: what happened last
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_stop_ends_a_role_waiting_out_its_backoff_at_once() -> None:
    supervisor = RoleSupervisor(first_retry_s=60.0)

    async def broken() -> None:
        raise RuntimeError("no")

    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run({"broken": broken}, stop))
    await _until(lambda: bool(supervisor.failing()))
    stop.set()
    await asyncio.wait_for(task, 2)


async def test_a_failing_listener_does_not_take_the_roles_down() -> None:
    async def unwritable() -> None:
        raise OSError("disk full")

    supervisor = RoleSupervisor(on_change=unwritable, first_retry_s=0.01)
    calls = 0

    async def broken_once(stop: asyncio.Event) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("first")
        await stop.wait()

    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run({"r": lambda: broken_once(stop)}, stop))
    await _until(lambda: calls == 2)
    stop.set()
    await asyncio.wait_for(task, 5)
    assert supervisor.states["r"].restarts == 1


async def test_a_role_that_waits_out_trouble_itself_is_failing_until_it_says_it_can_go_on() -> None:
    supervisor = RoleSupervisor(stable_s=0.05)
    report = supervisor.reporter("projector:graph")
    can_go_on = asyncio.Event()

    async def projector(stop: asyncio.Event) -> None:  # like a runner whose read model is down
        await report("read model unavailable: Neo4j at bolt://x is unavailable", 2.0)
        await can_go_on.wait()
        await report(None, None)
        await stop.wait()

    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run({"projector:graph": lambda: projector(stop)}, stop))
    await _until(lambda: bool(supervisor.failing()))
    await asyncio.sleep(0.2)  # well past the stable window: still failing, the role said so
    troubled = supervisor.failing()["projector:graph"]
    assert troubled.retry_in_s == 2.0 and troubled.restarts == 0
    assert troubled.last_error == "read model unavailable: Neo4j at bolt://x is unavailable"
    can_go_on.set()
    await _until(lambda: not supervisor.failing())
    assert supervisor.states["projector:graph"].state == "running"
    stop.set()
    await asyncio.wait_for(task, 5)


async def test_an_error_inside_a_roles_task_group_shows_as_itself() -> None:
    supervisor = RoleSupervisor(first_retry_s=0.02, max_retry_s=0.02, stable_s=5.0)

    async def grouped() -> None:
        async def store() -> None:
            raise LookupError("this graph was built by an older projection: rebuild it")

        async with asyncio.TaskGroup() as group:
            group.create_task(store())

    stop = asyncio.Event()
    task = asyncio.create_task(supervisor.run({"grouped": grouped}, stop))
    await _until(lambda: "grouped" in supervisor.failing())
    stop.set()
    await asyncio.wait_for(task, 5)
    error = supervisor.states["grouped"].last_error
    assert error == "LookupError: this graph was built by an older projection: rebuild it"
