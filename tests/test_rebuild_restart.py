"""A rebuild does not break the next start (issue 17, defect 1): after `eventloom rebuild NAME` of every
built-in projector, `eventloom down && eventloom up --detach` brings each back where it was, and new
events are projected, with no consumer in a restart loop (the sample plug-in projector, which does not
support rebuilds, runs alongside and restarts too)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from eventloom.settings import Settings
from tests.conftest import run_cli
from tests.runtime_support import install_plugin

pytestmark = pytest.mark.slow
REBUILT = ("graph", "keyword", "vector", "inferred")
RUNNING = {f"projector-{name}" for name in (*REBUILT, "type-counts")}  # type-counts: the sample plug-in


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Settings]:
    install_plugin()
    settings = Settings(data_dir=tmp_path / "data", producers="none")
    yield settings
    run_cli(settings, "down")


def append_turn(settings: Settings, session: str, text: str) -> None:
    payload = json.dumps({"role": "user", "text": text})
    result = run_cli(settings, "append", "--session", session, "--type", "transcript.turn", "--actor", "user",
                     "--payload", payload)  # fmt: skip
    assert result.returncode == 0, result.stderr


def projected_through(settings: Settings, timeout_s: float = 90) -> dict[str, int]:
    """Wait until every projector consumer has nothing pending; its delivered stream seq, by name."""
    deadline = time.monotonic() + timeout_s
    while True:
        statuses = json.loads(run_cli(settings, "projector", "status", "--json").stdout or "[]")
        mine = {s["consumer"]: s for s in statuses if s["consumer"].startswith("projector-")}
        if set(mine) >= RUNNING and all(s["lag"] == 0 for s in mine.values()):
            return {name: s["delivered_stream_seq"] for name, s in mine.items()}
        assert time.monotonic() < deadline, f"projectors did not catch up: {statuses}"
        time.sleep(0.5)


def test_every_projector_restarts_cleanly_after_a_rebuild(data: Settings) -> None:
    assert run_cli(data, "up", "--detach").returncode == 0
    for n in range(3):
        append_turn(data, "r1", f"The nightly backup number {n} of the billing database finished")
    projected_through(data)
    for name in REBUILT:
        rebuilt = run_cli(data, "rebuild", name, "--json", timeout=180)
        assert rebuilt.returncode == 0, (name, rebuilt.stderr)
    assert run_cli(data, "down").returncode == 0

    assert run_cli(data, "up", "--detach").returncode == 0
    append_turn(data, "r1", "The quarterly zebra migration of the ledger cluster started")
    last_seq = json.loads(run_cli(data, "status", "--json").stdout)["stream"]["last_seq"]
    delivered = projected_through(data)
    assert set(delivered.values()) == {last_seq}, delivered  # each one took the new event, none replayed
    time.sleep(1.5)  # a consumer in a restart loop would fail again within 0.5 s
    log = (data.data_dir / "node.log").read_text(errors="replace")
    assert "can not be updated" not in log and "restarting" not in log.lower(), log[-3000:]
    answer = json.loads(
        run_cli(data, "memory", "query", "zebra migration", "--session", "r1", "--json").stdout
    )
    assert any("zebra" in hit["summary"].lower() for hit in answer["hits"]), answer["hits"]
