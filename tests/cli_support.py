"""A pytest plug-in for the CLI tests: `node`, a node started and stopped the way a user does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eventloom.settings import Settings
from tests.conftest import run_cli


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Settings]:
    """A node started with `eventloom up --detach`, embedded NATS and all, stopped with `eventloom down`."""
    settings = Settings(data_dir=tmp_path / "data")
    started = run_cli(settings, "up", "--detach")
    assert started.returncode == 0, started.stderr
    try:
        yield settings
    finally:
        stopped = run_cli(settings, "down")
        assert stopped.returncode == 0, stopped.stderr
