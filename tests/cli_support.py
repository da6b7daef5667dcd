"""A pytest plug-in for the CLI tests: `node`, a node started and stopped the way a user does, and
`refusing_node`, one such node shared by a module's tests that must write nothing to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eventloom.settings import Settings
from tests.conftest import run_cli


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Settings]:
    """A node started with `eventloom up --detach`, embedded NATS and all, stopped with `eventloom down`."""
    yield from _node_in(tmp_path)


@pytest.fixture(scope="module")
def refusing_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """A `node` for the tests of input that is refused: each asserts its stream is still empty after."""
    yield from _node_in(tmp_path_factory.mktemp("refusing"))


def _node_in(root: Path) -> Iterator[Settings]:
    settings = Settings(data_dir=root / "data")
    started = run_cli(settings, "up", "--detach")
    assert started.returncode == 0, started.stderr
    try:
        yield settings
    finally:
        stopped = run_cli(settings, "down")
        assert stopped.returncode == 0, stopped.stderr
