"""Appends N events to one session as fast as it can; run twice at once by test_appender."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from eventloom.log import EventLog
from eventloom.request import AppendRequest
from eventloom.settings import Settings


async def main(data_dir: str, url: str, session: str, writer: str, count: int) -> None:
    async with await EventLog.open(Settings(data_dir=Path(data_dir), nats_url=url)) as log:
        # Mixed shapes on purpose: single appends and small pipelined batches race the other process.
        done = 0
        while done < count:
            size = 1 if done % 3 else min(7, count - done)
            requests = [
                AppendRequest(
                    session=session,
                    type="note.added",
                    actor=writer,
                    payload={"writer": writer, "n": done + i},
                )
                for i in range(size)
            ]
            await log.append_many(requests)
            done += size


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])))
