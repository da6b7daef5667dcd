"""Test helpers for the consumer runtime: installing a plug-in package, running a projector a while."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.metadata
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats.js.errors

from eventloom.keys import KeyStore
from eventloom.log import EventLog
from eventloom.schemas import EVENT_TYPES_GROUP
from projectors.protocol import Projector
from projectors.runner import ProjectorRunner, RunnerOptions

SAMPLE_PLUGIN = Path(__file__).resolve().parent / "fixtures" / "sample_plugin"
FAST = RunnerOptions(batch=50, max_deliver=3, backoff_s=(0.05, 0.1), fetch_timeout_s=0.2, retry_check_s=0.2)


_INSTALLED_HERE: set[str] = set()
"""The plug-in distributions this test run installed (not those it found installed)."""


def install_plugin(package_dir: Path = SAMPLE_PLUGIN) -> None:
    """pip-install a plug-in package (like a user would), then make its entry points visible."""
    name = tomllib.loads((package_dir / "pyproject.toml").read_text())["project"]["name"]
    if name not in _INSTALLED_HERE:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            _INSTALLED_HERE.add(name)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--force-reinstall", str(package_dir)],
        check=True,
    )  # fmt: skip
    importlib.invalidate_caches()
    register_event_types_of(name)


def register_event_types_of(distribution: str) -> None:
    """What a process started after the install does by itself (`load_plugin_event_types`): this one has
    loaded the packs' event types already, so it calls the new plug-in's `eventloom.event_types` itself."""
    for entry in importlib.metadata.entry_points(group=EVENT_TYPES_GROUP):
        if entry.dist is not None and entry.dist.name == distribution:
            entry.load()()


def uninstall_test_plugins() -> None:
    """Take out what `install_plugin` put into the environment: after `make test`, a developer's `eventloom
    up` in the same venv must not run the tests' example projectors."""
    if _INSTALLED_HERE:
        uninstall = [sys.executable, "-m", "pip", "uninstall", "--quiet", "--yes", *sorted(_INSTALLED_HERE)]
        subprocess.run(uninstall, check=False)
        _INSTALLED_HERE.clear()


@contextlib.asynccontextmanager
async def running(
    log: EventLog, projector: Projector, *, options: RunnerOptions = FAST, **kwargs: Any
) -> AsyncIterator[ProjectorRunner]:
    """A runner for `projector` in the background, stopped (gracefully) on exit."""
    kwargs.setdefault("keys", KeyStore(log.settings.data_dir))
    runner = ProjectorRunner(log.client, log.layout, projector, options=options, **kwargs)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    await asyncio.wait_for(runner.ready.wait(), 15)
    try:
        yield runner
    finally:
        stop.set()
        await task


async def drained(log: EventLog, consumer: str, timeout: float = 30) -> None:
    """Until `consumer` exists and has nothing pending or unacknowledged."""
    js = log.client.jetstream()
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        with contextlib.suppress(nats.js.errors.NotFoundError):
            info = await js.consumer_info(log.layout.name, consumer)
            if not info.num_pending and not info.num_ack_pending:
                return
        assert asyncio.get_running_loop().time() < deadline, f"{consumer} did not drain"
        await asyncio.sleep(0.05)
