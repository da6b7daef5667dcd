"""Domain packs shipped with Eventloom: each is a plug-in on the public API, found through entry points.

A pack is what a third-party domain would be: its event types (`eventloom.event_types`), a read model
(`eventloom.projectors`), what it adds to memory search (`eventloom.graph_extractors`), and its commands,
MCP tools and HTTP routes (`eventloom.cli`, `eventloom.mcp_tools`, `eventloom.http_routes`). Nothing in
the core imports a pack. `workflow` is the first: agent workflow runs, their messages, tool calls and
plans under review, and the repositories, issues and pull requests they serve.
"""

__all__: list[str] = []
