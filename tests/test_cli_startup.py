"""The CLI starts fast: every `eventloom` command imports the whole command tree, so the modules behind the
commands (MCP, the node, the read models' backends and their drivers) are imported when a command runs."""

from __future__ import annotations

import subprocess
import sys

HEAVY = (
    "mcp",
    "neo4j",
    "ladybug",
    "pyarrow",
    "numpy",
    "usearch",
    "httpx2",
    "starlette",
    "uvicorn",
    "gateway.node",
    "gateway.mcp",
    "projectors.backends",
    "readmodels.backends",
    "eventloom.log",
)


def test_importing_the_cli_leaves_the_heavy_modules_for_the_commands_that_use_them() -> None:
    code = f"import sys, gateway.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stdout
