"""`EventLog`: the one handle an application needs to append to and read the log."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from nats.aio.client import Client

from eventloom.appender import Appender
from eventloom.bus.connection import connect, credentials_of
from eventloom.bus.stream import StreamLayout, ensure_stream
from eventloom.citations import KnownHashes
from eventloom.event import Event
from eventloom.keys import KeyStore, Signer
from eventloom.position import Appended
from eventloom.reading import EventReading, verified_event
from eventloom.request import AppendRequest
from eventloom.runtime import resolve_nats_url
from eventloom.settings import Settings
from eventloom.tail import StoredEvent


class EventLog:
    """A connection to the stream with an appender signing as this data dir's active key."""

    def __init__(self, client: Client, layout: StreamLayout, signer: Signer, settings: Settings) -> None:
        self.client = client
        self.layout = layout
        self.settings = settings
        self.signer = signer
        self.keys = KeyStore(settings.data_dir)
        self.known_hashes = KnownHashes()
        """The hashes of events this process's consumers have verified: one cache for all of them."""
        self.appender = Appender(client, layout, signer, keys=self.keys, replicas=settings.replicas)

    @classmethod
    async def open(cls, settings: Settings, *, url: str | None = None, persistent: bool = True) -> EventLog:
        client = await connect(
            url or resolve_nats_url(settings),
            name="eventloom-log",
            persistent=persistent,
            credentials=credentials_of(settings),
        )
        try:
            layout = await ensure_stream(client, settings)
            signer = await asyncio.to_thread(KeyStore(settings.data_dir).active_signer)
        except BaseException:
            await client.close()
            raise
        return cls(client, layout, signer, settings)

    async def __aenter__(self) -> EventLog:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.client.drain()

    async def append(
        self,
        session: str,
        type: str,
        actor: str,
        payload: dict[str, Any] | None = None,
        *,
        caused_by: Sequence[str] = (),
        idempotency_key: str | None = None,
        expected_seq: int | None = None,
        principal: str | None = None,
    ) -> Event:
        """Append one event; with `expected_seq`, only if the session is at that seq (0: is new), else
        `WrongExpectedSeqError` and nothing is appended; `principal` records who was authenticated."""
        return await self.appender.append(
            session,
            type,
            actor,
            payload,
            caused_by=caused_by,
            idempotency_key=idempotency_key,
            expected_seq=expected_seq,
            principal=principal,
        )

    async def append_many(self, requests: Sequence[AppendRequest]) -> list[Event]:
        return await self.appender.append_many(requests)

    async def append_positioned(self, requests: Sequence[AppendRequest]) -> list[Appended]:
        """`append_many`, each event with its `Position` (session, seq and the stream sequence): give the
        position to a read as `after` to read this write."""
        return await self.appender.append_positioned(requests)

    async def append_settled(self, requests: Sequence[AppendRequest]) -> list[Appended | BaseException]:
        """Each request's outcome in order, its stored event or why it was refused (see `Appender`)."""
        return await self.appender.append_settled(requests)

    def events(
        self,
        session: str | None = None,
        *,
        from_seq: int = 1,
        start_stream_seq: int = 1,
        follow: bool = False,
    ) -> EventReading:
        """Events in stream order (one session's, or all), from event seq `from_seq` (and stream sequence
        `start_stream_seq`); what is not an event is skipped and counted (`EventReading.skipped`)."""
        subjects = [self.layout.subject_for(session)] if session else self.layout.partition_subjects()
        return EventReading(
            self.client,
            self.layout,
            self.keys,
            subjects,
            from_seq=from_seq,
            start_stream_seq=start_stream_seq,
            follow=follow,
        )

    async def event(self, session: str, seq: int) -> StoredEvent | None:
        """The session's event at `seq` and where the stream keeps it; None when no event that holds is
        there."""
        return await verified_event(self.client, self.layout, self.keys, session, seq)
