"""The CLI starts fast: every `eventloom` command imports the whole command tree, so the modules behind the
commands (MCP, the node, the read models' backends and their drivers) are imported when a command runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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


def test_a_node_on_the_embedded_backend_never_imports_the_neo4j_driver(tmp_path: Path) -> None:
    """The driver builds date tables and codecs at import: ~45 MB in every node that never talks to Neo4j.
    What `eventloom up` imports, then every installed projector and producer made as the node makes them."""
    code = f"""
import sys
import projectors.backends, gateway.node, gateway.mcp.http
from pathlib import Path
from eventloom.settings import Settings
from projectors.plugins import PRODUCERS_GROUP, PROJECTORS_GROUP, available, load_producer, load_projector
settings = Settings(data_dir=Path({str(tmp_path)!r}), graph_backend="ladybug")
for name in available(PROJECTORS_GROUP):
    load_projector(name, settings)
for name in available(PRODUCERS_GROUP):
    load_producer(name, settings)
print("neo4j" in sys.modules, sorted(available(PROJECTORS_GROUP)))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported, projectors = result.stdout.strip().split(" ", 1)
    assert imported == "False", f"the Neo4j driver was imported making {projectors}"
    assert "'vector'" in projectors and "'graph'" in projectors
