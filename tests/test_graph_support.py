"""Helpers shared by the graph tests (no tests here): real hash-chained events and graph dumps."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from eventloom.event import Event, compute_hash, utc_timestamp
from readmodels.graph.protocol import GraphStore

T0 = datetime(2025, 5, 1, 9, 0, tzinfo=UTC)


def ts(second: float) -> str:
    """The canonical timestamp `second` seconds after 2025-05-01T09:00:00Z."""
    return utc_timestamp(T0 + timedelta(seconds=second))


class SessionLog:
    """Builds a session's events the way the appender does: contiguous seqs, hash chain, one per second."""

    def __init__(self, session: str = "s1") -> None:
        self.session = session
        self.events: list[Event] = []

    def add(
        self,
        type: str,
        payload: dict[str, Any],
        *,
        at: float | None = None,
        actor: str = "agent",
        caused_by: Sequence[str] = (),
    ) -> Event:
        seq = len(self.events) + 1
        draft = Event(
            v=1,
            session=self.session,
            seq=seq,
            ts=ts(at if at is not None else seq),
            type=type,
            actor=actor,
            payload=payload,
            caused_by=list(caused_by),
            prev_hash=self.events[-1].hash if self.events else None,
            hash="",
            sig="",
            key_id="",
        )
        event = msgspec.structs.replace(draft, hash=compute_hash(draft))
        self.events.append(event)
        return event


async def count(
    store: GraphStore, pattern: str, where: str = "", params: dict[str, Any] | None = None
) -> int:
    """How many matches of a Cypher pattern (portable Cypher: runs on every backend)."""
    rows = await store.query(f"MATCH {pattern} {where} RETURN count(*) AS n", params)
    return int(rows[0]["n"])


async def dump(store: GraphStore, session: str) -> dict[str, Any]:
    """Everything the typed reads can see of a session, including closed versions and edges."""
    entity_rows = await store.query(
        "MATCH (e:Entity) WHERE e.session = $s RETURN e.uid AS uid, e.name AS name, e.entity_type AS type, "
        "e.summary AS summary, e.properties AS properties, e.valid_from AS valid_from, "
        "e.valid_to AS valid_to, e.version AS version ORDER BY uid",
        {"s": session},
    )
    edge_rows = await store.query(
        "MATCH (a:Entity)-[r:RELATES]->(b:Entity) WHERE r.session = $s RETURN r.uid AS uid, a.uid AS a, "
        "b.uid AS b, r.relation_type AS type, r.valid_from AS valid_from, r.valid_to AS valid_to, "
        "r.confidence AS confidence, r.carried_from AS carried_from ORDER BY uid",
        {"s": session},
    )
    return {
        "events": [msgspec.to_builtins(e) for e in await store.events(session)],
        "entities": entity_rows,
        "edges": edge_rows,
        "sources": [msgspec.to_builtins(s) for s in await store.sources(session)],
        "spine_links": await count(
            store, "(a:Event)-[:NEXT_EVENT]->(b:Event)", "WHERE a.session = $s", {"s": session}
        ),
        "version_links": await count(store, "(a:Entity)-[:SUPERSEDED_BY]->(b:Entity)"),
        "projected": await count(store, "(v:Event)-[:PROJECTED_ENTITY]->(e:Entity)"),
    }
