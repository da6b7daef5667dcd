"""`SqliteInferredStore`: the embedded inferred-edge read model (one SQLite file per generation).

Each edge is one row: its identity, session, whether it is retracted, and the whole record as JSON (the
audit view reads records whole). Generating an edge again replaces its record; retracting it keeps the
record, with when and why, and its trust drops to 0.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import msgspec

from readmodels.embedded.sqlite_db import (
    CHECKPOINTS_TABLE,
    SqliteDb,
    marks,
    read_checkpoints,
    save_checkpoints,
    unapplied,
)
from readmodels.inferred.model import (
    Contradicted,
    EventChanges,
    Generated,
    InferredEdge,
    InferredStatus,
    Retracted,
    Stats,
)

SAMPLES: Final = 5
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS edges (key TEXT PRIMARY KEY, triple_key TEXT NOT NULL, "
    "session TEXT NOT NULL, record BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS edges_triple ON edges(triple_key)",
    "CREATE INDEX IF NOT EXISTS edges_session ON edges(session)",
    CHECKPOINTS_TABLE,
)
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(InferredEdge).decode


class SqliteInferredStore:
    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self._db = SqliteDb(self.path, _SCHEMA, read_only=read_only)

    async def open(self) -> None:
        await self._db.open()

    async def close(self) -> None:
        await self._db.close()

    async def __aenter__(self) -> SqliteInferredStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self._db.read(lambda db: read_checkpoints(db, projector, sessions))

    async def apply(self, projector: str, batch: Sequence[EventChanges]) -> int:
        if not batch:
            return 0
        return await self._db.write(lambda db: _apply(db, projector, batch))

    async def edges(self, session: str | None = None) -> list[InferredEdge]:
        """Every edge (of `session`), retracted ones included, in the order they were generated."""
        return await self._db.read(lambda db: _edges(db, session))

    async def trust(self, keys: Sequence[str]) -> dict[str, float]:
        """The trust of each edge named by `keys` (`model.edge_key`, by id or by triple) that is known."""
        return await self._db.read(lambda db: _trust(db, list(dict.fromkeys(keys))))

    async def status(self, session: str | None = None) -> InferredStatus:
        return summarize(session, await self.edges(session))


def _apply(db: sqlite3.Connection, projector: str, batch: Sequence[EventChanges]) -> int:
    todo = unapplied(db, projector, batch)
    for event in todo:
        for change in event.changes:
            if isinstance(change, Generated):
                edge = change.edge
                db.execute(
                    "INSERT INTO edges (key, triple_key, session, record) VALUES (?, ?, ?, ?) ON CONFLICT "
                    "(key) DO UPDATE SET triple_key = excluded.triple_key, record = excluded.record",
                    (edge.key, change.triple_key, edge.session, _encode(edge)),
                )
            else:
                _update_named(db, change)
    save_checkpoints(db, projector, todo)
    return len(todo)


def _update_named(db: sqlite3.Connection, change: Retracted | Contradicted) -> None:
    keys = list(change.keys)
    named = marks(len(keys))
    rows = db.execute(
        f"SELECT key, record FROM edges WHERE key IN ({named}) OR triple_key IN ({named})",  # noqa: S608
        [*keys, *keys],
    ).fetchall()
    for key, record in rows:
        edge = _decode(record)
        if isinstance(change, Retracted):
            if edge.retracted_seq is not None:
                continue  # the first retraction is the one that counts
            edge.retracted_seq, edge.retracted_ts, edge.retraction_reason = (
                change.seq,
                change.ts,
                change.reason,
            )
            edge.trust = 0.0
        else:
            edge.contradictions += 1
        db.execute("UPDATE edges SET record = ? WHERE key = ?", (_encode(edge), key))


def _trust(db: sqlite3.Connection, keys: list[str]) -> dict[str, float]:
    if not keys:
        return {}
    named = marks(len(keys))
    rows = db.execute(
        f"SELECT key, triple_key, record FROM edges WHERE key IN ({named}) OR triple_key IN ({named})",  # noqa: S608
        [*keys, *keys],
    ).fetchall()
    wanted = set(keys)
    found: dict[str, float] = {}
    for key, triple, record in rows:
        trust = _decode(record).trust
        for name in (key, triple):
            if name in wanted:
                found[name] = min(found.get(name, trust), trust)  # two edges, one triple: the less trusted
    return found


def _edges(db: sqlite3.Connection, session: str | None) -> list[InferredEdge]:
    if session is None:
        rows = db.execute("SELECT record FROM edges ORDER BY rowid").fetchall()
    else:
        rows = db.execute("SELECT record FROM edges WHERE session = ? ORDER BY rowid", (session,)).fetchall()
    return [_decode(record) for (record,) in rows]


def _stats(values: list[float]) -> Stats:
    if not values:
        return Stats(count=0, min=None, mean=None, median=None, max=None)
    return Stats(
        count=len(values),
        min=round(min(values), 4),
        mean=round(statistics.fmean(values), 4),
        median=round(statistics.median(values), 4),
        max=round(max(values), 4),
    )


def summarize(session: str | None, edges: list[InferredEdge]) -> InferredStatus:
    """Counts, methods, confidence and trust statistics, evidence coverage and provenance gaps."""
    current = [edge for edge in edges if edge.retracted_seq is None]
    missing = [edge for edge in edges if not edge.has_provenance]
    return InferredStatus(
        session=session,
        edges=len(edges),
        current=len(current),
        retracted=len(edges) - len(current),
        contradicted=sum(1 for edge in edges if edge.contradictions),
        by_kind=dict(Counter(edge.kind for edge in edges)),
        by_method=dict(Counter(edge.method for edge in edges)),
        by_relation=dict(Counter(edge.relation_type for edge in edges)),
        confidence=_stats([edge.confidence for edge in edges]),
        trust=_stats([edge.trust for edge in current]),
        evidence_coverage=round(statistics.fmean(e.evidence_coverage for e in edges), 4) if edges else None,
        missing_provenance=len(missing),
        samples=sorted(current, key=lambda edge: -edge.trust)[:SAMPLES],
        missing_provenance_samples=missing[:SAMPLES],
    )
