"""Faults in a three-server cluster under sustained appends (issue 23); prints one JSON object.

    python bench/cluster.py                       # 5 leader kills + one fault of every other kind
    python bench/cluster.py --kills 10 --seconds 20 --events 500

What happens, in this order, with tests/durability_client.py appending ~1 KB events with idempotency keys
over 4 sessions the whole time (it records every acknowledgement with when its call began and returned):

1. `append_rate_per_s.R1`: a node on one embedded nats-server (R1), the client for `--seconds` after a
   2 s warm-up; the node stops.
2. `append_rate_per_s.R3`: `eventloom up --cluster 3` (R3 streams and buckets), the same client, payloads
   and duration.
3. Faults one after another, appends running throughout: `--kills` times kill -9 of the stream leader,
   interleaved with SIGSTOP of the leader for `--pause` seconds, kill -9 of a follower (restarted on its
   store), and a follower's store wiped, its last `.blk` truncated, bit-flipped (`tests/faults.py`). After
   each, until every replica is current and `--events` more appends are acknowledged, then an audit:
   every acknowledged event in the stream once, every chain linear (`tests/cluster_checks.py`).
4. At the end: the same audit, the ledger against the stream, `eventloom verify`, the keyword read model
   against a clean rebuild; acknowledged events lost would be reported and put back with `eventloom
   repair --apply`, from the ledger.

`failover_s` per leader kill: from the kill to the first acknowledgement of an append the client began
after the kill (appends in flight at the kill do not count: the dead leader may have answered them), so it
is an upper bound on the outage by at most one append's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, percentiles, progress_bar, server_binary_version
from partitions import process_cpu_s

from eventloom.log import EventLog
from eventloom.runtime import RuntimeInfo
from eventloom.settings import Settings
from gateway.node_process import NodeProcess
from tests.cluster_checks import (
    Ack,
    audit_settled,
    cli_json,
    keyword_equals_rebuild,
    ledger_differences,
    read_acks,
)
from tests.cluster_support import LocalCluster, cluster_settings
from tests.faults import BITFLIP, KILL_LEADER, KILL_RESTART, PAUSE, TRUNCATE, WIPE, AppendingClient, inject
from tests.faults import settle as settle_replicas

WARM_UP_S = 2.0
NODE_START_TIMEOUT_S = 120.0
OTHER_FAULTS = (PAUSE, KILL_RESTART, WIPE, TRUNCATE, BITFLIP)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kills", type=int, default=5, help="kill -9 of the stream leader, this many times")
    parser.add_argument("--seconds", type=float, default=15.0, help="each append-rate window (R1, R3)")
    parser.add_argument("--events", type=int, default=300, help="appends acknowledged after each fault")
    parser.add_argument("--pause", type=float, default=10.0, help="seconds a SIGSTOPped server stays stopped")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data dirs")
    parser.add_argument("--json", action="store_true", help="accepted for symmetry: output is always JSON")
    return parser.parse_args(argv)


def fault_plan(kills: int) -> list[str]:
    """Leader kills interleaved with the other kinds, so a damaged member may be elected afterwards."""
    plan: list[str] = []
    others = list(OTHER_FAULTS)
    for index in range(max(kills, len(others))):
        if index < kills:
            plan.append(KILL_LEADER)
        if others:
            plan.append(others.pop(0))
    return plan


def settings_for(root: Path, **overrides: Any) -> Settings:
    """The R1 node as the cluster's: the ledger mirror and one cheap projector (keyword)."""
    chosen: dict[str, Any] = {"projectors": "keyword", "producers": "none"}
    return Settings(data_dir=root / "data", **(chosen | overrides))


@dataclass
class Rate:
    per_s: float
    cpu_s_per_1k: dict[str, float]  # CPU seconds per 1,000 acknowledged appends: the node, the nats-servers


async def rate(client: AppendingClient, seconds: float, node: RuntimeInfo) -> Rate:
    """Acknowledged appends per second over `seconds` after a warm-up from the first acknowledgement, and
    the CPU the node and its nats-server(s) spent meanwhile (on 2 vCPUs, three servers compete for them)."""
    await client.wait_for_acks(1)
    first = min(a.acked or 0.0 for a in read_acks(client.acked_path))
    start, end = first + WARM_UP_S, first + WARM_UP_S + seconds
    nats_pids = [s.pid for s in node.nats_servers if s.pid] or [node.nats_pid or 0]
    await asyncio.sleep(max(0.0, start - time.monotonic()))
    before = (process_cpu_s(node.pid), sum(map(process_cpu_s, nats_pids)))
    await asyncio.sleep(max(0.0, end - time.monotonic()))
    after = (process_cpu_s(node.pid), sum(map(process_cpu_s, nats_pids)))
    await asyncio.sleep(0.5)  # the acknowledgements of the window's last appends are written
    acked = [a.acked for a in read_acks(client.acked_path) if a.acked is not None]
    count = sum(start <= t < end for t in acked)
    per_1k = {
        name: round((after[i] - before[i]) / max(count, 1) * 1000, 2)
        for i, name in enumerate(("node", "nats_servers"))
    }
    return Rate(count / seconds, per_1k)


async def r1_rate(root: Path, seconds: float) -> Rate:
    node = NodeProcess(settings_for(root))
    console.print("R1: one nats-server")
    info = await asyncio.to_thread(node.start, NODE_START_TIMEOUT_S)
    client = AppendingClient(root / "load", node.settings.data_dir, info.nats_url)
    try:
        measured = await rate(client, seconds, info)
        await client.stop()
    finally:
        client.kill()
        await asyncio.to_thread(node.stop)
    return measured


def failover(acks: list[Ack], killed_at: float) -> float | None:
    after = [a.acked for a in acks if a.began is not None and a.acked is not None and a.began >= killed_at]
    return min(after) - killed_at if after else None


async def run_faults(
    cluster: LocalCluster, client: AppendingClient, log: EventLog, args: argparse.Namespace
) -> list[dict[str, Any]]:
    plan = fault_plan(args.kills)
    done: list[dict[str, Any]] = []
    with progress_bar() as bar:
        task = bar.add_task("faults", total=len(plan), rate="")
        for kind in plan:
            bar.update(task, rate=kind)
            before = client.acked_count()
            fault = await inject(kind, cluster, log.client, log.settings.stream, pause_s=args.pause)
            settled_s = await settle_replicas(log.client, log.settings.stream)
            await client.wait_for_acks(before + args.events, timeout=300)
            acks = read_acks(client.acked_path)
            found, _, first_missing = await audit_settled(log, acks)
            record: dict[str, Any] = {"kind": kind, "member": fault.member, "detail": fault.detail}
            record["first_read_missing"] = first_missing
            record |= {"back_s": round(fault.back_s, 2), "settled_s": round(settled_s, 2)}
            if kind == KILL_LEADER:
                seconds = failover(acks, fault.at)
                record["failover_s"] = round(seconds, 3) if seconds is not None else None
            done.append(record | found.summary())
            console.print(f"{kind} {fault.member}: {record.get('failover_s', '')} lost={len(found.lost)}")
            bar.advance(task)
    return done


async def final_checks(log: EventLog, client: AppendingClient) -> dict[str, Any]:
    acks = read_acks(client.acked_path)
    found, stream, _ = await audit_settled(log, acks)
    checks: dict[str, Any] = {"audit": found.summary()}
    if found.lost or found.chain_breaks:
        console.print(f"[red]{len(found.lost)} acknowledged events lost: repairing from the ledger[/]")
        code, repaired = await asyncio.to_thread(cli_json, log.settings, "repair", "--apply")
        checks["repair"] = {
            "exit": code,
            "sessions": [s for s in repaired["sessions"] if s["status"] != "ok"],
        }
        found, stream, _ = await audit_settled(log, acks)
        checks["after_repair"] = found.summary()
    checks["ledger_differs"] = await ledger_differences(log, stream)
    code, verified = await asyncio.to_thread(cli_json, log.settings, "verify", "--wait", "30")
    checks["verify_ok"] = code == 0 and verified.get("ok") is True
    keyword = await keyword_equals_rebuild(log, stream)
    checks["keyword"] = {"equals_clean_rebuild": keyword.equal} | keyword.summary()
    return checks


async def r3_and_faults(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    cluster = LocalCluster(cluster_settings(root, projectors="keyword"))
    console.print("R3: three nats-servers")
    await asyncio.to_thread(cluster.start, NODE_START_TIMEOUT_S)
    settings = replace(cluster.settings, nats_url=cluster.url, replicas=1)
    client = AppendingClient(root / "load", settings.data_dir, cluster.url, deadline=3600)
    try:
        measured = await rate(client, args.seconds, cluster.runtime())
        async with await EventLog.open(settings) as log:
            version = str(log.client._server_info.get("version", ""))
            faults = await run_faults(cluster, client, log, args)
            summary = await client.stop()
            checks = await final_checks(log, client)
    finally:
        client.kill()
        await asyncio.to_thread(cluster.stop)
    return {"rate": measured, "faults": faults, "client": summary, "checks": checks, "version": version}


def result(r1: Rate, r3: dict[str, Any], args: argparse.Namespace, load: float) -> dict[str, Any]:
    faults, checks = r3["faults"], r3["checks"]
    audit_end = checks["audit"]
    failovers = [f["failover_s"] for f in faults if f.get("failover_s") is not None]
    by_kind: dict[str, int] = {}
    lost_by_kind: dict[str, int] = {}
    stale_by_kind: dict[str, int] = {}
    for fault in faults:
        kind = fault["kind"]
        by_kind[kind] = by_kind.get(kind, 0) + 1
        lost_by_kind[kind] = lost_by_kind.get(kind, 0) + fault["lost"]
        stale_by_kind[kind] = stale_by_kind.get(kind, 0) + fault["first_read_missing"]
    fail = percentiles(failovers) if failovers else {"p50": None, "p95": None, "max": None}
    ratio = r3["rate"].per_s / r1.per_s if r1.per_s else 0.0
    after = checks.get("after_repair", audit_end)
    return {
        "benchmark": "cluster",
        "acked": audit_end["acked"],
        "lost": audit_end["lost"],
        "duplicates": audit_end["duplicates"],
        "faults_injected": {"count": len(faults), "by_kind": by_kind},
        "failover_s": {"p50": fail["p50"], "max": fail["max"], "samples": failovers},
        "append_rate_per_s": {"R1": round(r1.per_s, 1), "R3": round(r3["rate"].per_s, 1)},
        "r3_over_r1": round(ratio, 3),
        "cpu_s_per_1k_appends": {"R1": r1.cpu_s_per_1k, "R3": r3["rate"].cpu_s_per_1k},
        "goals": {
            "lost_0": audit_end["lost"] == 0,
            "duplicates_0": audit_end["duplicates"] == 0,
            "failover_p50_le_3s": fail["p50"] is not None and fail["p50"] <= 3.0,
            "failover_max_le_10s": fail["max"] is not None and fail["max"] <= 10.0,
            "r3_ge_half_r1": ratio >= 0.5,
        },
        "consistent_at_end": after["lost"] == 0 and not after["chain_breaks"] and not checks["ledger_differs"]
        and checks["verify_ok"] and checks["keyword"]["equals_clean_rebuild"],
        "lost_by_kind": lost_by_kind,
        "first_read_missing_by_kind": stale_by_kind,
        "faults": faults,
        "checks": checks,
        "client": r3["client"],
        "options": {"kills": args.kills, "seconds": args.seconds, "events": args.events, "pause": args.pause},
        "machine": {**machine(r3["version"] or server_binary_version()), "loadavg_1m_at_start": load},
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }  # fmt: skip


async def bench(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    load = round(os.getloadavg()[0], 2)
    r1 = await r1_rate(root / "r1", args.seconds)
    console.print(f"R1: {r1.per_s:.1f} appends/s")
    r3 = await r3_and_faults(root / "r3", args)
    return result(r1, r3, args, load)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="eventloom-bench-cluster-"))
    try:
        output = asyncio.run(bench(args, tmp))
    finally:
        if args.keep:
            console.print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write(msgspec.json.encode(output).decode() + "\n")
    sys.stdout.flush()
    return 0 if output["consistent_at_end"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
