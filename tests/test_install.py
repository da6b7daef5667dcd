"""What the first `make` of a fresh clone prints: the editable install of the project itself builds without
a warning (issue 17, defect 10: a block of setuptools warnings greeted every new user)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_editable_install_builds_without_warnings() -> None:
    """The build backend's editable hook, run as pip runs it, with every warning an error."""
    with tempfile.TemporaryDirectory() as wheels:
        built = subprocess.run(
            [sys.executable, "-W", "error", "-c",
             "import sys; from setuptools import build_meta; print(build_meta.build_editable(sys.argv[1]))",
             wheels],
            cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert built.returncode == 0, built.stderr[-3000:]
        assert "Warning" not in built.stderr, built.stderr[-3000:]
        wheel = Path(wheels) / built.stdout.strip().splitlines()[-1]
        assert wheel.name.startswith("eventloom_memory-") and wheel.exists()
