"""`ConsumerLease` (projectors/lease.py) against a real nats-server: one holder, a standby that takes over
only a holder silent for `lease_s` by its own clock, exactly one winner among standbys, fencing of a holder
whose lease was taken, release, and a crashed holder of this host taken over at once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys

import msgspec
import pytest

from eventloom.log import EventLog
from eventloom.settings import Settings
from projectors.lease import ConsumerLease, LeaseRecord, dead_here, lease_holders

pytestmark = pytest.mark.anyio
KEY = "projector-leased"


class Clock:
    """A clock the test moves: what `lease_s` of silence means, without waiting for it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def _acquired(lease: ConsumerLease, timeout: float = 5) -> bool:
    stop = asyncio.Event()
    try:
        return await asyncio.wait_for(lease.acquire(stop), timeout)
    except TimeoutError:
        return False


async def test_one_holder_and_a_standby_that_takes_over_only_a_silent_one(log: EventLog) -> None:
    holder_clock, standby_clock = Clock(), Clock()
    holder = ConsumerLease(log.client, KEY, 3.0, clock=holder_clock)
    standby = ConsumerLease(log.client, KEY, 3.0, clock=standby_clock)
    assert await _acquired(holder) and holder.held and not holder.took_over
    looking = asyncio.create_task(standby.acquire(asyncio.Event()))
    await asyncio.sleep(0.5)  # it looks every 0.3 s: the holder's revision is seen, the clock stands
    assert not looking.done() and standby.current is not None and standby.current.holder == holder.holder_id
    standby_clock.now += 2.9  # not yet lease_s since it first saw this revision
    holder_clock.now += 2.9
    assert await holder.confirm()  # a renewal: a new revision, the standby's count starts over
    await asyncio.sleep(0.5)  # seen at its next look
    standby_clock.now += 2.9
    await asyncio.sleep(0.5)
    assert not looking.done()
    standby_clock.now += 0.2  # the renewed revision has now been silent for 3.1 s by the standby's clock
    assert await asyncio.wait_for(looking, 5) and standby.held and standby.took_over
    holder_clock.now += 3.1  # as much time passed for the holder, which was silent (stalled) all along
    assert not holder.held  # by its own clock, before any word from the server
    assert not await holder.still_held() and holder.lost.is_set()  # the renewal is refused: fenced
    holders = await lease_holders(log.client)
    assert holders[KEY].holder == standby.holder_id


async def test_a_holder_whose_loop_was_busy_keeps_a_lease_nobody_took(log: EventLog) -> None:
    clock = Clock()
    holder = ConsumerLease(log.client, KEY, 1.0, clock=clock)
    assert await _acquired(holder)
    clock.now += 5
    assert not holder.held
    assert await holder.still_held() and holder.held  # the compare-and-swap proves nobody took it


async def test_of_two_standbys_exactly_one_wins(log: EventLog) -> None:
    holder = ConsumerLease(log.client, KEY, 0.3)
    assert await _acquired(holder)  # then never renewed: a holder that died
    first, second = ConsumerLease(log.client, KEY, 0.3), ConsumerLease(log.client, KEY, 0.3)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(lease.acquire(stop)) for lease in (first, second)]
    done, _ = await asyncio.wait(tasks, timeout=5, return_when=asyncio.FIRST_COMPLETED)
    renewing = [asyncio.create_task(lease.keep()) for lease in (first, second) if lease.held]
    await asyncio.sleep(1.0)  # the loser keeps looking: the winner's renewals never let it in
    assert len(done) == 1 and len(renewing) == 1 and sum(not task.done() for task in tasks) == 1
    assert sum(lease.held for lease in (first, second)) == 1
    stop.set()
    for task in [*tasks, *renewing]:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_released_lease_is_taken_at_the_next_look(log: EventLog) -> None:
    holder, standby = ConsumerLease(log.client, KEY, 30.0), ConsumerLease(log.client, KEY, 30.0)
    assert await _acquired(holder)
    looking = asyncio.create_task(standby.acquire(asyncio.Event()))
    await asyncio.sleep(0.2)
    await holder.release()
    assert await asyncio.wait_for(looking, 3) and not standby.took_over  # long before the 30 s lease
    assert not holder.held


async def test_a_crashed_holder_of_this_host_is_taken_over_at_once(log: EventLog) -> None:
    """A worker restarted after a crash need not wait `lease_s`: the old pid is gone from this host."""
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
    )
    dead = f"{socket.gethostname()}:{int(gone.stdout)}:0000"
    assert dead_here(dead) and not dead_here(f"{socket.gethostname()}:1:0000")  # pid 1 lives
    assert not dead_here(f"another-host:{int(gone.stdout)}:0000")  # another host's: its clock decides
    lease = ConsumerLease(log.client, KEY, 30.0)
    bucket = await lease._bucket()
    await bucket.put(KEY, msgspec.json.encode(LeaseRecord(holder=dead, role="projector", acquired_at="-")))
    assert await _acquired(lease, timeout=3) and lease.took_over


def test_the_lease_setting_is_validated() -> None:
    with pytest.raises(ValueError, match="EVENTLOOM_PROJECTOR_LEASE_S"):
        Settings(projector_lease_s=0)
    with pytest.raises(ValueError, match="lease_s"):
        ConsumerLease(None, KEY, float("nan"))  # type: ignore[arg-type]
