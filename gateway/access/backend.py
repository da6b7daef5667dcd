"""What the tools talk to: the log (appends, replay, verify) and memory (the query service over NATS).

A gateway keeps no state of its own: any number of them can serve the same deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventloom.log import EventLog
from eventloom.settings import Settings
from readmodels.query.client import MemoryClient
from readmodels.query.protocol import MemoryService

DEFAULT_AUDIT_SESSION = "eventloom-audit"


@dataclass(frozen=True)
class Backend:
    log: EventLog
    memory: MemoryService
    audit_session: str = DEFAULT_AUDIT_SESSION

    @property
    def settings(self) -> Settings:
        return self.log.settings


async def open_backend(settings: Settings, url: str | None = None) -> Backend:
    """A backend on the NATS at `url` (default: `EVENTLOOM_NATS_URL`, else the node on this data dir)."""
    log = await EventLog.open(settings, url=url)
    return Backend(log=log, memory=MemoryClient(log.client), audit_session=settings.audit_session)
