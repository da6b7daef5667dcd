"""Output a shell can use (issue 45, item 5): a command's readable report is on stdout, errors stay on
stderr; tables fit a sane width when piped; `health gateway` finds the gateway the node serves; a stopped
worker says what it did in words."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventloom.runtime import read_runtime
from eventloom.settings import Settings
from projectors.runner_options import RunnerStats
from tests.conftest import REPO, cli_env, run_cli

pytest_plugins = ["tests.cli_support"]  # the `node` fixture

REPORTS = {  # each report command, and a line of its answer
    ("status",): "stream ",
    ("verify",): "verified: ",
    ("status", "peers"): "capabilities",
    ("projector", "status"): "projector-graph",
    ("projector", "list"): "* = run by the node",
    ("consumer", "list"): "ledger-mirror",
    ("health", "node"): "healthy",
    ("quarantine", "list"): "0 quarantined message(s)",
    ("dlq", "list"): "0 dead letter(s)",
    ("repair",): "ledger and stream agree",
}


def test_every_report_is_on_stdout_and_errors_stay_on_stderr(node: Settings) -> None:
    written = run_cli(node, "append", "--session", "out", "--type", "note.added", "--actor", "a")
    assert written.returncode == 0, written.stderr
    for args, expected in REPORTS.items():
        result = run_cli(node, *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        assert expected in result.stdout, (args, result.stdout, result.stderr)
        assert expected not in result.stderr, (args, result.stderr)
    refused = run_cli(node, "quarantine", "list", "--keyring", str(node.data_dir / "no-such-keyring.json"))
    assert refused.returncode == 2 and "error:" in refused.stderr and refused.stdout == ""
    down = run_cli(node, "health", "gateway", "--url", "http://127.0.0.1:9/healthz")
    assert down.returncode == 1 and "unhealthy" in down.stdout


PANEL = """
from rich.panel import Panel
from gateway.cli.common import out
out.print(Panel("x" * 300 + " " + "y" * 20, title="a long line", expand=False), soft_wrap=False)
"""


def test_piped_panels_are_a_sane_width_and_tables_keep_each_row_on_a_line(node: Settings) -> None:
    env = {k: v for k, v in cli_env(node).items() if k != "COLUMNS"}
    for columns, widest in ((None, 120), ("72", 72)):
        shown = subprocess.run(
            [sys.executable, "-c", PANEL],
            env=env if columns is None else {**env, "COLUMNS": columns},
            capture_output=True, text=True, cwd=REPO, check=True, timeout=60,
        )  # fmt: skip
        lines = shown.stdout.splitlines()
        assert max(len(line) for line in lines) == widest and "y" * 20 in shown.stdout, shown.stdout
    table = subprocess.run(
        [sys.executable, "-m", "gateway", "projector", "status"],
        env={**env, "COLUMNS": "60"}, capture_output=True, text=True, cwd=REPO, check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = [line.split("│")[1].strip() for line in table.splitlines() if line.startswith("│")]
    assert "projector-graph" in rows and "…" not in table, table  # piped, a row is never folded or cut


@pytest.fixture
def http_node(tmp_path: Path) -> Iterator[Settings]:
    """A node serving MCP over HTTP on a port of its choosing (not the default 8787)."""
    settings = Settings(data_dir=tmp_path / "data")
    started = run_cli(settings, "up", "--detach", "--http", "127.0.0.1:0")
    assert started.returncode == 0, started.stderr
    try:
        yield settings
    finally:
        stopped = run_cli(settings, "down")
        assert stopped.returncode == 0, stopped.stderr


def test_health_gateway_probes_the_address_the_node_recorded(http_node: Settings) -> None:
    info = read_runtime(http_node.runtime_file)
    assert info is not None and info.http_url and ":8787/" not in info.http_url
    probed = run_cli(http_node, "health", "gateway")
    assert probed.returncode == 0, (probed.stdout, probed.stderr)
    assert "healthy" in probed.stdout and "unhealthy" not in probed.stdout


def test_a_stopped_worker_says_what_it_did_in_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVENTLOOM_PROJECTORS", "none")  # the worker below is the keyword projector's only one
    settings = Settings(data_dir=tmp_path / "data")
    assert run_cli(settings, "up", "--detach").returncode == 0
    try:
        stopped = _run_then_stop(settings, "projector", "run", "keyword")
    finally:
        assert run_cli(settings, "down").returncode == 0
    line = next(line for line in stopped.splitlines() if line.startswith("stopped projector-keyword: "))
    assert " applied, " in line and " batch(es) in " in line, line
    assert "object at 0x" not in stopped and "RunnerStats(" not in stopped


def _run_then_stop(settings: Settings, *args: str) -> str:
    """Run a long-running command until it says it runs, stop it as Ctrl-C would: all it wrote on stderr."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "gateway", *args],
        env=cli_env(settings), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert worker.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = worker.stderr.readline()
        assert line, f"the worker exited before it ran: {''.join(seen)}"
        seen.append(line)
        if line.startswith("running "):
            break
    os.kill(worker.pid, signal.SIGINT)
    _, rest = worker.communicate(timeout=60)
    assert worker.returncode == 0, "".join(seen) + rest
    return "".join(seen) + rest


def test_runner_stats_read_as_words() -> None:
    stats = RunnerStats(applied=3, batches=2)
    stats.stages.add("fetch", 0.25)
    stats.stages.add("apply", 0.5, items=3)
    summary = stats.summary()
    assert summary.startswith("3 applied, 0 skipped, 0 dead-lettered") and "2 batch(es)" in summary
    assert "time by stage: apply 0.50s (1 calls), fetch 0.25s (1 calls)" in summary
