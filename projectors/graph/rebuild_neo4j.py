"""Rebuilding the graph on Neo4j: empty the database, then bulk-load the whole log into it.

Neo4j community holds one database, so a Neo4j graph is rebuilt in place rather than into a new
generation: stop the graph projector that writes it first (a concurrent writer makes the load fail on a
uniqueness constraint; nothing is silently merged). The log comes from the stream, or from a JSONL ledger
directory, verified (chains, hashes, signatures) before anything is deleted. The load writes checkpoints
last, so the live projector, restarted afterwards, skips everything the rebuild applied and continues.

Citations are checked as the live projector checks them (`eventloom.citations`): from the stream by the
runner's verifier; from a ledger against an index of every (session, seq) -> hash in it, so an event the
live projector refuses into the dead-letter queue ("uncited: ...") is left out of a rebuild too.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import msgspec
import nats.js.errors

from eventloom.citations import CitationChecker, Lookup
from eventloom.errors import EventloomError
from eventloom.event import Event, decode_event
from eventloom.keys import Keyring, KeyStore
from eventloom.ledger.files import iter_lines, ledger_path, ledger_sessions
from eventloom.log import EventLog
from eventloom.settings import Settings
from eventloom.verify import verify_ledger_dir
from projectors.graph.projector import GraphProjector
from projectors.rebuild import replay_stream
from projectors.runner import ProjectorRunner, RunnerOptions
from readmodels.backends import neo4j_store
from readmodels.neo4j.bulk import Neo4jBulkLoader

BATCH: Final = 5000
CONSUMER: Final = "rebuild-graph-neo4j"
PhasedProgress = Callable[[str, int, int], None]
"""`progress(phase, done, total)`: phase "replay" counts events, phase "load" counts rows written."""


class Neo4jRebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    backend: str
    source: str
    uri: str
    database: str
    events: int
    seconds: float
    events_per_s: float
    load_seconds: dict[str, float] = {}
    """Where the load's time went: seconds per table, and dropping / building the deferred indexes."""
    refused: int = 0
    """Ledger events left out because what they cite is not in the ledger with that hash."""


async def _emptied(
    settings: Settings, projector: str, progress: PhasedProgress | None, keep_tables: Path | None = None
) -> GraphProjector[Neo4jBulkLoader]:
    """The database emptied (schema kept, migrations applied), and a bulk-loading projector for it."""
    async with neo4j_store(settings) as store:
        await store.clear()
    loader = Neo4jBulkLoader(neo4j_store(settings), keep_tables=keep_tables)
    if progress is not None:
        loader.load_progress = lambda done, total: progress("load", done, total)
    return GraphProjector(loader, name=projector, skipped_sessions=frozenset({settings.audit_session}))


def _report(
    settings: Settings,
    source: str,
    events: int,
    started: float,
    graph: GraphProjector[Neo4jBulkLoader],
    refused: int = 0,
) -> Neo4jRebuildReport:
    seconds = time.perf_counter() - started
    return Neo4jRebuildReport(
        backend="neo4j",
        source=source,
        uri=settings.neo4j_uri or "",
        database=settings.neo4j_database,
        events=events,
        seconds=round(seconds, 3),
        events_per_s=round(events / seconds, 1) if seconds else 0.0,
        load_seconds=dict(graph.store.neo4j_sink.seconds),
        refused=refused,
    )


async def rebuild_neo4j_from_stream(
    log: EventLog,
    *,
    projector: str = "graph",
    progress: PhasedProgress | None = None,
    keep_tables: Path | None = None,
) -> Neo4jRebuildReport:
    """Replay the stream from sequence 1 into the emptied Neo4j database (`keep_tables`: a directory
    that receives the resolved tables as Arrow files, for comparing loaders)."""
    started = time.perf_counter()
    js = log.client.jetstream()
    with contextlib.suppress(nats.js.errors.NotFoundError):  # left by an interrupted rebuild: start over
        await js.delete_consumer(log.layout.name, CONSUMER)
    graph = await _emptied(log.settings, projector, progress, keep_tables)
    runner = ProjectorRunner(
        log.client,
        log.layout,
        graph,
        role="rebuild",
        consumer=CONSUMER,
        options=RunnerOptions(batch=BATCH, fetch_timeout_s=0.5, max_deliver=3),
        keys=KeyStore(log.settings.data_dir),
    )
    total = int((await js.stream_info(log.layout.name)).state.last_seq)
    try:
        replayed = None if progress is None else (lambda done, all_: progress("replay", done, all_))
        await replay_stream(log, runner, total, replayed)
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_consumer(log.layout.name, CONSUMER)
    return _report(log.settings, "stream", runner.stats.applied, started, graph)


async def rebuild_neo4j_from_ledger(
    settings: Settings,
    ledger_dir: Path,
    keyring: Keyring,
    *,
    projector: str = "graph",
    progress: PhasedProgress | None = None,
) -> Neo4jRebuildReport:
    """Verify the ledger directory, then load it, session by session, into the emptied database."""
    started = time.perf_counter()
    reports = await asyncio.to_thread(verify_ledger_dir, ledger_dir, keyring)
    broken = [f"{r.session}: {f.where} at seq {f.seq}: {f.reason}" for r in reports for f in r.findings]
    if broken:
        raise EventloomError(f"the ledger in {ledger_dir} does not verify; nothing was deleted: {broken[:5]}")
    if not reports:
        raise EventloomError(f"no ledger files in {ledger_dir}")
    checker = CitationChecker(await asyncio.to_thread(ledger_lookup, ledger_dir))
    graph = await _emptied(settings, projector, progress)
    total = sum(r.ledger_events or 0 for r in reports if r.session not in graph.skipped_sessions)
    await graph.open()
    done = refused = 0
    try:
        batches = _ledger_batches(ledger_dir, graph.skipped_sessions)
        while batch := await asyncio.to_thread(next, batches, None):
            kept = [event for event in batch if await checker.problem(event) is None]
            await graph.apply(kept)
            done += len(batch)
            refused += len(batch) - len(kept)
            if progress is not None:
                progress("replay", done, total)
    finally:
        await graph.close()
    return _report(settings, f"ledger:{ledger_dir}", done - refused, started, graph, refused)


def _ledger_batches(ledger_dir: Path, skipped: frozenset[str]) -> Iterator[list[Event]]:
    batch: list[Event] = []
    for session in ledger_sessions(ledger_dir):
        if session in skipped:
            continue
        for _, line in iter_lines(ledger_path(ledger_dir, session)):
            if line:
                batch.append(decode_event(line))
            if len(batch) >= BATCH:
                yield batch
                batch = []
    if batch:
        yield batch


class _Cited(msgspec.Struct, frozen=True):
    session: str
    seq: int
    hash: str


def ledger_lookup(ledger_dir: Path) -> Lookup:
    """A citation lookup over every event of the ledger directory: (session, seq) -> hash."""
    index: dict[tuple[str, int], str] = {}
    for session in ledger_sessions(ledger_dir):
        for _, line in iter_lines(ledger_path(ledger_dir, session)):
            if line:
                key = msgspec.json.decode(line, type=_Cited)
                index[(key.session, key.seq)] = key.hash

    async def lookup(session: str, seq: int) -> str | None:
        return index.get((session, seq))

    return lookup
