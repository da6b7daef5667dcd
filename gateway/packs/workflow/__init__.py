"""The workflow pack: agent workflow runs on the graph (runs, messages, tool calls, plans under review,
repositories, issues and pull requests), built on the public plug-in API only.

`events` holds its event types, `model` what its read model writes, `reads` what it answers. See
docs/workflows.md.
"""

__all__: list[str] = []
