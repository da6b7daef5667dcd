"""How long an `eventloom` command takes to start: wall seconds per run of a few commands that need no node,
next to the raw baseline of the same interpreter starting with nothing to import (`python -c pass`).

Prints exactly one JSON object on stdout; progress goes to stderr.

    python bench/cli_start.py              # 7 runs of each command
    python bench/cli_start.py --runs 15

Every command runs in a fresh process, as a user's shell runs it; the data dir is an empty temporary one, so
`status` answers "no node is running" (what is timed is the start, not a node's answer).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from common import console, machine, percentiles, progress_bar, server_binary_version

COMMANDS = (("--help",), ("status",), ("tail", "--help"), ("memory", "query", "--help"))


def timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False, timeout=120)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()
    python = sys.executable
    result: dict[str, Any] = {"benchmark": "cli_start", "runs": args.runs, "seconds": {}}
    with tempfile.TemporaryDirectory() as data, progress_bar() as bar:
        cases = {"python -c pass": [python, "-c", "pass"]}
        for command in COMMANDS:
            cases["eventloom " + " ".join(command)] = [
                python, "-m", "gateway", "--data-dir", str(Path(data) / "d"), *command,
            ]  # fmt: skip
        task = bar.add_task("starting commands", total=len(cases) * args.runs, rate="")
        for name, argv in cases.items():
            samples = []
            for _ in range(args.runs):
                samples.append(timed(argv))
                bar.advance(task)
            result["seconds"][name] = percentiles(samples)
    baseline = result["seconds"].pop("python -c pass")
    result["raw_python_start_s"] = baseline
    result["median_over_raw_s"] = {
        name: round(measured["p50"] - baseline["p50"], 2) for name, measured in result["seconds"].items()
    }
    result["date"] = datetime.now(UTC).date().isoformat()
    result["machine"] = machine(server_binary_version())
    console.print(f"eventloom status starts in {result['seconds']['eventloom status']['p50']} s (median)")
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
