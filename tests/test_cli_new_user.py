"""The CLI as a new user met it (issue 17): what the running node runs, removing a left-over consumer,
options where a user puts them, clear refusals instead of tracebacks, and a demo that keeps your data."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.settings import Settings
from gateway.cli import global_options_first
from tests.conftest import cli_env, run_cli

pytest_plugins = ["tests.cli_support"]  # the `node` fixture


def test_projector_list_stars_what_the_running_node_runs_not_this_shell(node: Settings) -> None:
    """Issue 17, defect 8: a shell whose EVENTLOOM_PROJECTORS differs from the node's still sees the node."""
    shell = {**cli_env(node), "EVENTLOOM_PROJECTORS": "graph"}
    listed = subprocess.run(
        [sys.executable, "-m", "gateway", "projector", "list", "--json"],
        env=shell, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["keyword"]["running"] is True and rows["keyword"]["enabled"] is False
    assert rows["graph"]["running"] is True and rows["graph"]["enabled"] is True
    text = subprocess.run(
        [sys.executable, "-m", "gateway", "projector", "list"],
        env=shell, capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "* keyword" in text.stdout and "run by the node" in text.stdout


def test_all_but_some_plugins_is_one_setting() -> None:
    """`EVENTLOOM_PROJECTORS=all,-name`: the documented way to take one plug-in out of the node."""
    installed = ["graph", "inferred", "keyword", "my-counts", "vector"]
    settings = Settings(projectors="all,-my-counts", producers="none")
    assert settings.enabled("projectors", installed) == ["graph", "inferred", "keyword", "vector"]
    assert Settings(projectors=" all ").enabled("projectors", installed) == installed
    with pytest.raises(ValueError, match="not installed: nosuch"):
        Settings(projectors="all,-nosuch").enabled("projectors", installed)
    with pytest.raises(ValueError, match="only exclusions"):
        Settings(projectors="all,graph").enabled("projectors", installed)


def test_consumer_rm_removes_a_left_over_consumer_and_refuses_live_ones(node: Settings) -> None:
    """Issue 17, defect 9: a consumer a removed producer left is listed and removed, after a confirmation."""

    async def leave_a_consumer() -> None:
        async with await EventLog.open(node, persistent=False) as log:
            config = ConsumerConfig(durable_name="producer-old-linker", ack_policy=AckPolicy.EXPLICIT)
            await log.client.jetstream().add_consumer(log.layout.name, config)
            # `up --detach` returns once every role reads: the node's own consumers exist already
            existing = {c.name for c in await log.client.jetstream().consumers_info(log.layout.name)}
            assert {"ledger-mirror", "projector-graph", "projector-keyword"} <= existing, existing

    asyncio.run(leave_a_consumer())
    listed = {row["name"]: row for row in json.loads(run_cli(node, "consumer", "list", "--json").stdout)}
    assert listed["producer-old-linker"]["node_role"] is None
    assert listed["projector-graph"]["node_role"] == "projector:graph"
    table = run_cli(node, "consumer", "list").stdout  # piped: a cell folds, it is never cut
    assert any("projector-graph" in line and "projector:graph" in line for line in table.splitlines())
    assert "…" not in table

    unconfirmed = run_cli(node, "consumer", "rm", "producer-old-linker")  # stdin is not a terminal
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    for live in ("projector-graph", "ledger-mirror"):
        refused = run_cli(node, "consumer", "rm", live, "--yes")
        assert refused.returncode == 2, refused.stderr
    assert run_cli(node, "consumer", "rm", "no-such-consumer", "--yes").returncode == 1
    applying = run_cli(node, "schema-apply")  # the node holds the embedded graph: a clear refusal
    assert applying.returncode == 2 and "eventloom down" in applying.stderr

    removed = run_cli(node, "consumer", "rm", "producer-old-linker", "--yes")
    assert removed.returncode == 0, removed.stderr
    consumers = {c["name"] for c in json.loads(run_cli(node, "status", "--json").stdout)["consumers"]}
    assert "producer-old-linker" not in consumers and "projector-graph" in consumers


def test_data_dir_is_accepted_after_the_command(node: Settings) -> None:
    """Issue 17, defect 10: `eventloom status --data-dir X` works like `eventloom --data-dir X status`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVENTLOOM_")}
    after = subprocess.run(
        [sys.executable, "-m", "gateway", "status", "--json", "--data-dir", str(node.data_dir)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["node"]["pid"] > 0
    assert global_options_first(["memory", "query", "x", f"--data-dir={node.data_dir}"]) == [
        f"--data-dir={node.data_dir}", "memory", "query", "x",
    ]  # fmt: skip
    assert global_options_first(["append", "--", "--data-dir", "d"]) == ["append", "--", "--data-dir", "d"]


def test_small_things_a_new_user_hit(tmp_path: Path) -> None:
    """Issue 17, defect 10: an unknown projector is refused before any work (no progress bar), and flags
    show no `<bool>` in `--help`."""
    settings = Settings(data_dir=tmp_path / "no-node")
    refused = run_cli(settings, "rebuild", "nosuch")
    assert refused.returncode == 2
    assert "no projector named 'nosuch': installed are claims, graph, inferred, keyword" in refused.stderr
    assert "rebuilding" not in refused.stderr and "no Eventloom node" not in refused.stderr
    bad_sync = run_cli(settings, "up", "--sync", "bogus")
    assert (
        bad_sync.returncode == 2
        and "--sync: must be" in bad_sync.stderr
        and "Traceback" not in bad_sync.stderr
    )
    no_ledger = run_cli(settings, "verify", "--ledger-only", str(tmp_path / "nowhere"))
    assert no_ledger.returncode == 2 and "is not a directory" in no_ledger.stderr
    assert "env: EVENTLOOM_DATA_DIR" in run_cli(settings, "--help").stdout  # not eaten as markup
    nothing_yet = run_cli(settings, "memory", "inferred-status")
    assert nothing_yet.returncode == 1 and "no inferred-edge read model yet" in nothing_yet.stderr
    assert not settings.data_dir.exists()  # a failed read leaves no directory behind
    for command in (["status"], ["memory", "query"], ["consumer", "rm"], ["up"]):
        shown = run_cli(settings, *command, "--help")
        assert shown.returncode == 0 and "--help" in shown.stdout
        assert "<bool>" not in shown.stdout, command


def test_the_demo_never_empties_a_data_dir_holding_other_memory(tmp_path: Path) -> None:
    """`eventloom demo` starts fresh, but only over a demo's own data: not over a user's ./.eventloom."""
    settings = Settings(data_dir=tmp_path / "mine")
    ledger = settings.ledger_dir
    ledger.mkdir(parents=True)
    (ledger / "my-project.jsonl").write_text("{}\n")
    refused = run_cli(settings, "demo")
    assert refused.returncode == 2 and "my-project" in refused.stderr and "--keep" in refused.stderr
    assert (ledger / "my-project.jsonl").exists()


def test_a_missing_private_key_is_a_clear_error(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    keys = KeyStore(settings.data_dir)
    signer = keys.active_signer()
    (keys.private_dir / f"{signer.key_id}.key").unlink()  # a restore that forgot the private key
    started = run_cli(settings, "up")
    assert started.returncode == 1 and "is missing" in started.stderr
    assert "eventloom keys new" in started.stderr
    assert "Traceback" not in started.stderr
