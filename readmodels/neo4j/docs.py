"""`Neo4jDocs`: one read model's memory documents (keyword or vector) as nodes in the graph's Neo4j.

Each model has a label of its own (`KeywordDoc`, `VectorDoc`) and checkpoints of its own (`DocCheckpoint`
nodes keyed by model, projector and session), so rebuilding one model never touches the other, nor the
graph. A batch's documents and its checkpoints are one managed transaction, which the driver retries on
transient errors; inside it, events at or below their session's checkpoint are skipped. A document's key
(`uid`) is its event's place and its position among the event's documents, so a repeated write merges
instead of duplicating.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import msgspec
import neo4j
from neo4j import AsyncDriver, AsyncManagedTransaction

from readmodels.documents import DocKind, EventDocs, MemoryDoc
from readmodels.graph.cypher.io import Row
from readmodels.neo4j.driver import RETRY_TIME_S, auto_commit, connect, fetch, unavailable_as_error
from readmodels.neo4j.schema import DEFAULT_VECTOR_DIMENSIONS, schema_plan

T = TypeVar("T")
Work = Callable[[AsyncManagedTransaction], Awaitable[T]]
Prepare = Callable[[list[EventDocs]], Awaitable[list[Row]]]
"""The document rows (`doc_rows`) of events about to be applied, made before the transaction opens."""

LABELS: Final = {"keyword": "KeywordDoc", "vector": "VectorDoc"}
ROWS_PER_STATEMENT: Final = 5_000
DELETE_BATCH: Final = 5_000
HIT_FIELDS: Final = tuple(name for name in MemoryDoc.__struct_fields__ if name != "context")
"""A hit's document: all but a turn's borrowed context (`readmodels.keyword.context`), never shown."""
DOC_MAP: Final = "d {" + ", ".join(f".{name}" for name in HIT_FIELDS) + "}"
"""A document node back as a `MemoryDoc` map (Cypher built from the struct's field names only)."""
ORDER_HITS: Final = "ORDER BY score DESC, d.session, d.seq, d.ord"
_CHECKPOINTS: Final = (
    "MATCH (c:DocCheckpoint) WHERE c.model = $model AND c.projector = $projector AND c.session IN $sessions "
    "RETURN c.session AS session, c.seq AS seq"
)
_SAVE_CHECKPOINTS: Final = (
    "UNWIND $rows AS r MERGE (c:DocCheckpoint {model: $model, projector: $projector, session: r.session}) "
    "SET c.seq = r.seq, c.event_hash = r.event_hash"
)


def past_checkpoints(applied: dict[str, int], batch: Sequence[EventDocs]) -> list[EventDocs]:
    """The events of `batch` past their session's checkpoint, in order (`applied` advances with them)."""
    todo = []
    for event in batch:
        if event.seq > applied.get(event.session, 0):
            applied[event.session] = event.seq
            todo.append(event)
    return todo


def doc_rows(events: Sequence[EventDocs], key: str = "") -> list[Row]:
    """One row per document: its node key `uid` (`key`, then the event's place and the document's
    position in it), its event's `session` and `seq`, and the node's properties `props` (no `context`
    when it is empty: only the keyword model's turns carry one)."""
    return [
        {
            "uid": f"{key}{event.session}/{event.seq}/{position}",
            "session": event.session,
            "seq": event.seq,
            "props": {**_properties(doc), "ord": position},
        }
        for event in events
        for position, doc in enumerate(event.docs)
    ]


def _properties(doc: MemoryDoc) -> dict[str, Any]:
    props = msgspec.structs.asdict(doc)
    if not doc.context:
        del props["context"]
    return props


def doc_filters(
    session: str | None, as_of: str | None, kinds: Sequence[DocKind] | None
) -> tuple[str, dict[str, Any]]:
    """The search filters as a condition on `d` (constant text, values as parameters) and its parameters."""
    conditions, params = ["true"], dict[str, Any]()
    if session is not None:
        conditions.append("d.session = $session")
        params["session"] = session
    if as_of is not None:
        conditions.append("d.ts <= $as_of")  # RFC 3339 UTC with fixed width: text order is time order
        params["as_of"] = as_of
    if kinds:
        conditions.append("d.kind IN $kinds")
        params["kinds"] = list(kinds)
    return " AND ".join(conditions), params


def as_doc(row: Row) -> MemoryDoc:
    return msgspec.convert(row, MemoryDoc)


async def _checkpoints(
    tx: AsyncManagedTransaction, model: str, projector: str, sessions: Sequence[str]
) -> dict[str, int]:
    params = {"model": model, "projector": projector, "sessions": list(dict.fromkeys(sessions))}
    return {str(row["session"]): int(row["seq"]) for row in await fetch(tx, _CHECKPOINTS, params)}


class Neo4jDocs:
    """The documents of `model` ("keyword" or "vector") in the Neo4j database `database` at `uri`."""

    def __init__(
        self,
        model: str,
        uri: str,
        *,
        user: str = "neo4j",
        password: str = "",
        database: str = "neo4j",
        vector_dimensions: int = DEFAULT_VECTOR_DIMENSIONS,
        connection_timeout_s: float = 5.0,
        retry_time_s: float = RETRY_TIME_S,
    ) -> None:
        self.model = model
        self.label = LABELS[model]
        self.uri = uri
        self.database = database
        self._auth = (user, password)
        self._plan = schema_plan(vector_dimensions)  # the whole database's schema: every store applies it
        self._timeouts = (connection_timeout_s, retry_time_s)
        self._driver: AsyncDriver | None = None
        self._merge = f"UNWIND $rows AS r MERGE (d:{self.label} {{uid: r.uid}}) SET d += r.props"
        self.migrations_applied: list[str] = []

    async def open(self) -> None:
        if self._driver is None:
            connection_timeout_s, retry_time_s = self._timeouts
            self._driver, self.migrations_applied = await connect(
                self.uri,
                self._auth,
                self.database,
                self._plan,
                connection_timeout_s=connection_timeout_s,
                retry_time_s=retry_time_s,
            )

    async def close(self) -> None:
        driver, self._driver = self._driver, None
        if driver is not None:
            await driver.close()

    def _opened(self) -> AsyncDriver:
        if self._driver is None:
            raise RuntimeError(f"the {self.model} store on {self.uri} is not open")
        return self._driver

    def _session(self, mode: str) -> neo4j.AsyncSession:
        return self._opened().session(database=self.database, default_access_mode=mode)

    async def read(self, work: Work[T]) -> T:
        async with self._session(neo4j.READ_ACCESS) as session:
            return await unavailable_as_error(session.execute_read(work), self.uri)

    async def write(self, work: Work[T]) -> T:
        async with self._session(neo4j.WRITE_ACCESS) as session:
            return await unavailable_as_error(session.execute_write(work), self.uri)

    async def rows(self, cypher: str, params: dict[str, Any]) -> list[Row]:
        """The rows of one read statement."""
        return await self.read(lambda tx: fetch(tx, cypher, params))

    async def applied_seqs(self, projector: str, sessions: Sequence[str]) -> dict[str, int]:
        return await self.read(lambda tx: _checkpoints(tx, self.model, projector, sessions))

    async def apply(self, projector: str, batch: Sequence[EventDocs], prepare: Prepare) -> int:
        """Write the documents of the events past the checkpoints, and the checkpoints, in one transaction.

        The checkpoints are read once before, so that `prepare` (embedding, say) only works on what is new
        and never inside the transaction; they are read again inside it, which is what decides."""
        todo = past_checkpoints(await self.applied_seqs(projector, [e.session for e in batch]), batch)
        if not todo:
            return 0
        rows = await prepare(todo)

        async def work(tx: AsyncManagedTransaction) -> int:
            fresh = past_checkpoints(
                await _checkpoints(tx, self.model, projector, [e.session for e in todo]), todo
            )
            kept = {(event.session, event.seq) for event in fresh}
            writing = [row for row in rows if (row["session"], row["seq"]) in kept]
            for start in range(0, len(writing), ROWS_PER_STATEMENT):
                await fetch(tx, self._merge, {"rows": writing[start : start + ROWS_PER_STATEMENT]})
            last = {event.session: event for event in fresh}
            marks = [{"session": s, "seq": e.seq, "event_hash": e.event_hash} for s, e in last.items()]
            await fetch(tx, _SAVE_CHECKPOINTS, {"model": self.model, "projector": projector, "rows": marks})
            return len(fresh)

        return await self.write(work)

    async def clear(self) -> None:
        """Delete this model's checkpoints, then its documents (before it is rebuilt in place).

        Checkpoints first: a clear cut short then leaves documents that replaying merges into, never
        checkpoints that would make the replay skip documents already deleted."""
        execute = auto_commit(self._opened(), self.database)
        await unavailable_as_error(
            execute("MATCH (c:DocCheckpoint {model: $model}) DELETE c", {"model": self.model}), self.uri
        )
        await unavailable_as_error(
            execute(
                f"MATCH (d:{self.label}) "
                f"CALL (d) {{ DETACH DELETE d }} IN TRANSACTIONS OF {DELETE_BATCH} ROWS",
                {},
            ),
            self.uri,
        )
