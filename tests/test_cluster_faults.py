"""A fault suite against real processes (issue 23, item 3): a node on three nats-servers (R3), a client
appending with idempotency keys throughout, and one fault of each kind after another: kill -9 the stream
leader, SIGSTOP the leader for 10 s, kill -9 a follower and let it restart on its store, wipe a follower's
store, truncate and bit-flip one of a follower's `.blk` files, then kill the leader once more (a damaged
member may now be elected).

After each fault, once the replicas are current and appends go on: every acknowledged event is in the
stream, each once, and every chain is linear (read again for a few seconds if a read misses some: a replica
back from a truncated `.blk` can serve a short read for a moment; `first_read_missing` reports it).
After all of them: the ledger equals the stream, `eventloom verify` is green, and the keyword read model
equals a clean rebuild. Should a fault lose acknowledged events, the test says so and shows `eventloom repair
--apply` putting them back from the ledger. One cluster for all (its start costs ~5-10 s); bench/cluster.py
runs the longer version and measures failover.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from eventloom.log import EventLog
from tests.cluster_checks import (
    audit_settled,
    cli_json,
    keyword_equals_rebuild,
    ledger_differences,
    read_acks,
)
from tests.cluster_support import LocalCluster, cluster_settings
from tests.faults import (
    BITFLIP,
    KILL_LEADER,
    KILL_RESTART,
    PAUSE,
    TRUNCATE,
    WIPE,
    AppendingClient,
    inject,
    settle,
)

pytestmark = pytest.mark.slow
SEQUENCE = (KILL_LEADER, PAUSE, KILL_RESTART, WIPE, TRUNCATE, BITFLIP, KILL_LEADER)
SESSIONS = 2  # concurrent sessions, half the benchmark's: fewer events to check at the end
ACKS_BETWEEN_FAULTS = 60  # appends acknowledged after each fault before the next: the cluster works again


async def _faults_with_appends(cluster: LocalCluster, root: Path) -> dict[str, Any]:
    settings = replace(cluster.settings, nats_url=cluster.url, replicas=1)
    client = AppendingClient(root / "load", settings.data_dir, cluster.url, sessions=SESSIONS)
    report: dict[str, Any] = {"faults": []}
    try:
        async with await EventLog.open(settings) as log:
            await client.wait_for_acks(ACKS_BETWEEN_FAULTS)
            for kind in SEQUENCE:
                before = client.acked_count()
                fault = await inject(kind, cluster, log.client, settings.stream)
                settled_s = await settle(log.client, settings.stream)
                await client.wait_for_acks(before + ACKS_BETWEEN_FAULTS)
                found, _, first_missing = await audit_settled(log, read_acks(client.acked_path))
                record: dict[str, Any] = {"kind": kind, "member": fault.member, "detail": fault.detail}
                record |= {"back_s": round(fault.back_s, 2), "settled_s": round(settled_s, 2)}
                report["faults"].append(record | found.summary() | {"first_read_missing": first_missing})
            report["client"] = await client.stop()
            await _check_the_end(log, client, report)
    finally:
        client.kill()
    return report


async def _check_the_end(log: EventLog, client: AppendingClient, report: dict[str, Any]) -> None:
    acks = read_acks(client.acked_path)
    found, stream, _ = await audit_settled(log, acks)
    report["final"] = found.summary()
    if found.lost:  # not hidden: reported, then put back from the ledger
        code, repaired = await asyncio.to_thread(cli_json, log.settings, "repair", "--apply")
        report["repair"] = {"exit": code, "republished": sum(s["republished"] for s in repaired["sessions"])}
        found, stream, _ = await audit_settled(log, acks)
        report["after_repair"] = found.summary()
    assert found.ok, json.dumps(report)
    report["ledger_differs"] = await ledger_differences(log, stream)
    assert not report["ledger_differs"], json.dumps(report)
    code, verified = await asyncio.to_thread(cli_json, log.settings, "verify", "--wait", "30")
    assert code == 0 and verified["ok"] is True, json.dumps(verified)[:3000]
    counts = {s["session"]: (s["ledger_events"], s["stream_events"]) for s in verified["sessions"]}
    assert counts == {s: (len(events), len(events)) for s, events in stream.items()}
    keyword = await keyword_equals_rebuild(log, stream)
    report["keyword"] = keyword.summary()
    if not keyword.equal:
        node_log = (log.settings.data_dir / "node.log").read_text(errors="replace").splitlines()
        report["keyword"]["log"] = [line for line in node_log if "keyword" in line][-40:]
    assert keyword.equal and keyword.live_docs >= found.stream_events, json.dumps(report["keyword"])


def test_acknowledged_appends_survive_one_fault_of_each_kind(tmp_path: Path) -> None:
    started = time.monotonic()
    cluster = LocalCluster(cluster_settings(tmp_path, projectors="keyword"))
    cluster.start()
    try:
        report = asyncio.run(_faults_with_appends(cluster, tmp_path))
    finally:
        cluster.stop()
    report["total_s"] = round(time.monotonic() - started, 1)
    print(f"\ncluster faults: {json.dumps(report)}")
    assert all(f["lost"] == 0 and f["duplicates"] == 0 and not f["chain_breaks"] for f in report["faults"]), (
        json.dumps(report["faults"])
    )
    assert report["final"]["lost"] == 0, "acknowledged events were lost (repaired from the ledger)"
