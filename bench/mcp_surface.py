"""What an agent pays before it asks anything: each MCP toolset's `tools/list`, in tools and tokens.

Prints one JSON object: `{"toolsets": {"default": {"tools": N, "tokens": T, "chars": C}, ...},
"tokenizer": "...", "goal": {...}}`. Tokens are the characters of the compact JSON `tools/list` sends,
divided by 4 (the usual estimate for English and JSON with BPE tokenizers; no model's tokenizer is shipped
with Eventloom, and an estimate that needs none keeps the script offline). The goal of issue 44: the default
toolset at most 10 tools and 3,000 tokens.

    python bench/mcp_surface.py
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import Any

from common import machine

from gateway.mcp.surface import TOKENIZER, toolset_surfaces

GOAL_TOOLS = 10
GOAL_TOKENS = 3000


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    surfaces = toolset_surfaces()
    toolsets: dict[str, Any] = {
        surface.name: {
            "tools": len(surface.tools),
            "tokens": surface.tokens,
            "chars": len(surface.listed_json),
            "names": [tool["name"] for tool in surface.tools],
        }
        for surface in surfaces
    }
    default = toolsets["default"]
    report = {
        "benchmark": "mcp_surface",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/mcp_surface.py",
        "toolsets": toolsets,
        "every_toolset": {
            "tools": sum(t["tools"] for t in toolsets.values()),
            "tokens": sum(t["tokens"] for t in toolsets.values()),
        },
        "tokenizer": TOKENIZER,
        "goal": {
            "default_tools_at_most": GOAL_TOOLS,
            "default_tokens_at_most": GOAL_TOKENS,
            "met": default["tools"] <= GOAL_TOOLS and default["tokens"] <= GOAL_TOKENS,
        },
        "machine": machine(""),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
