"""Rebuilding the graph on Neo4j by replaying the stream; prints one JSON object (progress on stderr).

A node (embedded NATS + ledger mirror; projectors and producers off) is started apart, bench/load.py appends
`--events` realistic events in a third process, then `eventloom rebuild graph --backend neo4j`'s code path
replays the whole stream into an emptied Neo4j (`NEO4J_URI`, or a server provisioned the way the tests do
it). The anchor, in the same run: `neo4j-admin database import full` of the very rows the rebuild loaded
(kept as Arrow files, written as CSV untimed), into a scratch directory, with the import tool from the same
Maven jars as the local server; `ratio` is the rebuild's rate over the anchor's (null, with the reason,
when the server is not the local one). A second, older baseline: plain `UNWIND ... MERGE` of as many
entity nodes (seven properties, a uniqueness constraint on the key), 10,000 per transaction.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import neo4j
from common import console, load_process, load_records, machine, progress_bar, server_binary_version
from load import CHUNK
from rich.progress import TaskID

from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from projectors.graph.rebuild_neo4j import Neo4jRebuildReport, rebuild_neo4j_from_stream
from readmodels.backends import neo4j_store
from readmodels.neo4j.admin_import import ImportReport, import_tables
from readmodels.neo4j.bulk import kept_tables
from readmodels.neo4j.local import NEO4J_VERSION, Neo4jEndpoint, provision_neo4j
from readmodels.neo4j.local.server import prepare_classpath

RAW_BATCH = 10_000


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events to append and replay (100000)")
    parser.add_argument("--sessions", type=int, default=8, help="sessions (default 8)")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


async def append(root: Path, nats_url: str, total: int, sessions: int) -> None:
    load = await load_process(
        root, nats_url, "--prefix", "neo", "--sessions", str(sessions), "--events", str(total)
    )
    with progress_bar() as progress:
        task = progress.add_task("append", total=total, rate="")
        async for record in load_records(load):
            if "seq" in record:
                progress.advance(task, CHUNK)


def driver_for(endpoint: Neo4jEndpoint) -> neo4j.AsyncDriver:
    return neo4j.AsyncGraphDatabase.driver(endpoint.uri, auth=(endpoint.user, endpoint.password))


async def raw_merge_rate(endpoint: Neo4jEndpoint, count: int) -> float:
    """Plain `UNWIND MERGE` of `count` entity nodes into the same server (then removed)."""
    rows = [
        {
            "uid": f"raw-{i}",
            "session": f"s{i % 8}",
            "name": f"entity-{i}",
            "entity_type": "service",
            "summary": f"summary of entity {i}",
            "valid_from": "2026-01-01T00:00:00.000000Z",
            "version": 1,
        }
        for i in range(count)
    ]
    statement = (
        "UNWIND $rows AS r MERGE (e:RawEntity {uid: r.uid}) SET e.session = r.session, e.name = r.name, "
        "e.entity_type = r.entity_type, e.summary = r.summary, e.valid_from = r.valid_from, "
        "e.version = r.version"
    )
    async with neo4j.AsyncGraphDatabase.driver(
        endpoint.uri, auth=(endpoint.user, endpoint.password)
    ) as driver:
        await driver.execute_query(
            "CREATE CONSTRAINT raw_uid IF NOT EXISTS FOR (e:RawEntity) REQUIRE e.uid IS UNIQUE"
        )
        started = time.perf_counter()
        for start in range(0, count, RAW_BATCH):
            await driver.execute_query(statement, {"rows": rows[start : start + RAW_BATCH]})
        seconds = time.perf_counter() - started
        async with driver.session() as session:
            result = await session.run(
                "MATCH (e:RawEntity) CALL (e) { DELETE e } IN TRANSACTIONS OF 10000 ROWS"
            )
            await result.consume()
        await driver.execute_query("DROP CONSTRAINT raw_uid")
    return count / seconds


async def server_version(endpoint: Neo4jEndpoint) -> str:
    async with neo4j.AsyncGraphDatabase.driver(
        endpoint.uri, auth=(endpoint.user, endpoint.password)
    ) as driver:
        records, _, _ = await driver.execute_query("CALL dbms.components() YIELD versions, edition")
        return f"{records[0]['versions'][0]} {records[0]['edition']}"


async def rebuild(args: argparse.Namespace, root: Path, endpoint: Neo4jEndpoint) -> Neo4jRebuildReport:
    """Append the events, then replay them into Neo4j, keeping the loaded tables under `root`."""
    node = NodeProcess(Settings(data_dir=root / "data", projectors="none", producers="none"))
    info = node.start()
    try:
        total = args.events // args.sessions * args.sessions
        console.print(f"appending {total} events")
        await append(root, info.nats_url, total, args.sessions)
        console.print("rebuilding the graph on Neo4j from the stream")
        async with await EventLog.open(settings_for(root, endpoint, info.nats_url), persistent=False) as log:
            with progress_bar() as progress:
                tasks: dict[str, TaskID] = {}

                def update(phase: str, done: int, all_: int) -> None:
                    if phase not in tasks:
                        tasks[phase] = progress.add_task(f"rebuild: {phase}", total=all_, rate="")
                    progress.update(tasks[phase], completed=done, total=all_)

                return await rebuild_neo4j_from_stream(log, progress=update, keep_tables=root / "tables")
    finally:
        node.stop()


def settings_for(root: Path, endpoint: Neo4jEndpoint, nats_url: str = "") -> Settings:
    return Settings(
        data_dir=root / "data",
        nats_url=nats_url or None,
        graph_backend="neo4j",
        neo4j_uri=endpoint.uri,
        neo4j_user=endpoint.user,
        neo4j_password=endpoint.password,
    )


def anchor(root: Path, endpoint: Neo4jEndpoint) -> tuple[ImportReport | None, str | None]:
    """`neo4j-admin database import full` of the kept tables, or why it was not run."""
    if endpoint.source != "local":
        return None, (
            f"the server is not the local one (source {endpoint.source}): the import tool writes a store "
            "directory on the server's machine, which this benchmark cannot reach"
        )
    console.print("anchor: neo4j-admin database import full of the same rows")
    return import_tables(prepare_classpath(), kept_tables(root / "tables"), root / "import"), None


def anchor_fields(report: Neo4jRebuildReport, imported: ImportReport | None, rows: int) -> dict[str, Any]:
    if imported is None:
        return {"ratio": None, "load_ratio": None}
    loading = sum(report.load_seconds.values())
    return {
        "ratio": round(imported.seconds / report.seconds, 3),
        "load_ratio": round(imported.seconds / loading, 3) if loading else None,
        "anchor_rows_match": imported.nodes + imported.relationships == rows,
    }


async def bench(args: argparse.Namespace, root: Path, endpoint: Neo4jEndpoint) -> dict[str, Any]:
    report = await rebuild(args, root, endpoint)
    async with neo4j_store(settings_for(root, endpoint)) as store:
        counts = await store.query(
            "MATCH (n) WHERE NOT n:Migration WITH count(n) AS nodes "
            "MATCH ()-[r]->() RETURN nodes, count(r) AS relationships"
        )
        await store.clear()
    imported, why_not = await asyncio.to_thread(anchor, root, endpoint)
    console.print("raw baseline: UNWIND MERGE of as many entity nodes")
    raw = await raw_merge_rate(endpoint, report.events)
    ratio_to_raw = report.events_per_s / raw if raw else 0.0
    rows = counts[0]["nodes"] + counts[0]["relationships"]
    rows_per_event = round(rows / report.events, 2) if report.events else 0
    fields = anchor_fields(report, imported, rows)
    return {
        "benchmark": "rebuild_neo4j",
        "events_replayed": report.events,
        "seconds": report.seconds,
        "events_per_s": report.events_per_s,
        "rows_per_event": rows_per_event,
        **fields,
        "anchor": None
        if imported is None
        else {
            "tool": f"neo4j-admin database import full (Neo4j {NEO4J_VERSION}, CSV)",
            "seconds": imported.seconds,
            "events_per_s": round(report.events / imported.seconds, 1),
            "rows_per_s": round((imported.nodes + imported.relationships) / imported.seconds, 1),
            "nodes": imported.nodes,
            "relationships": imported.relationships,
            "csv_seconds_untimed": imported.csv_seconds,
        },
        "anchor_unavailable": why_not,
        "load_seconds": report.load_seconds,
        "replay_seconds": round(report.seconds - sum(report.load_seconds.values()), 3),
        "graph": {**counts[0], "rows_per_event": rows_per_event},
        "rows_written_per_s": round(rows / report.seconds, 1) if report.seconds else 0,
        "raw_merge_nodes_per_s": round(raw, 1),
        "ratio_to_raw": round(ratio_to_raw, 3),
        "goals": {
            "events_ge_100000": report.events >= 100_000,
            "seconds_le_20": report.seconds <= 20,
            "ratio_reported": fields["ratio"] is not None,
        },
        "neo4j": {
            "source": endpoint.source,
            "server": await server_version(endpoint),
            "driver": neo4j.__version__,
        },
        "machine": machine(server_binary_version()),
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="eventloom-bench-neo4j-"))
    try:
        with provision_neo4j() as endpoint:
            console.print(f"Neo4j: {endpoint.uri} ({endpoint.source})")
            result = asyncio.run(bench(args, root, endpoint))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
