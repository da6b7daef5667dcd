"""Installs the sample third-party plug-in (tests/fixtures/sample_plugin) into the running interpreter."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

SAMPLE_PLUGIN = Path(__file__).resolve().parent / "fixtures" / "sample_plugin"


def install_sample_plugin() -> None:
    """pip-install the fixture package (like a user would), then make its entry points visible."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(SAMPLE_PLUGIN),
        ],
        check=True,
    )
    importlib.invalidate_caches()
