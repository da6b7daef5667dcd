"""`eventloom status` and `projector status` show each consumer's lag in events and in seconds."""

from __future__ import annotations

import asyncio
import json

import pytest

from eventloom.bus.consumer import ConsumerSpec, DurableConsumer
from eventloom.log import EventLog
from eventloom.settings import Settings
from tests.conftest import run_cli

pytestmark = pytest.mark.anyio


async def test_status_shows_lag_in_events_and_seconds(log: EventLog, settings: Settings) -> None:
    subjects = log.layout.partition_subjects()
    lagging = DurableConsumer(log.client, log.layout.name, ConsumerSpec("projector-lagging", subjects))
    caught_up = DurableConsumer(log.client, log.layout.name, ConsumerSpec("projector-caught-up", subjects))
    for consumer in (lagging, caught_up):
        await consumer.open()
    for n in range(3):
        await log.append("lag", "note.added", "agent", {"text": f"note {n}"})
    for message in await caught_up.fetch(10, timeout=2.0):
        await message.ack()
    await asyncio.sleep(1.2)  # the oldest unread event is now more than a second old

    status = json.loads((await asyncio.to_thread(run_cli, settings, "status", "--json")).stdout)
    consumers = {c["name"]: c for c in status["consumers"]}
    assert consumers["projector-lagging"]["lag"] == 3
    assert 1.0 <= consumers["projector-lagging"]["lag_s"] < 30
    assert consumers["projector-caught-up"]["lag"] == 0 and consumers["projector-caught-up"]["lag_s"] == 0

    listed = json.loads((await asyncio.to_thread(run_cli, settings, "projector", "status", "--json")).stdout)
    by_name = {s["consumer"]: s for s in listed}
    assert by_name["projector-lagging"]["lag"] == 3 and by_name["projector-lagging"]["lag_s"] >= 1.0
    assert by_name["projector-caught-up"]["lag_s"] == 0

    shown = await asyncio.to_thread(run_cli, settings, "status")
    table = shown.stdout  # the report is on stdout
    row = next(line for line in table.splitlines() if "projector-lagging" in line)
    cells = [cell.strip() for cell in row.split("│")[1:-1]]
    assert cells[:2] == ["projector-lagging", "3"] and float(cells[2]) >= 1.0  # consumer, lag, lag s
    for consumer in (lagging, caught_up):
        await consumer.close()
