"""The MCP gateway: the tools agents call, over stdio (`eventloom mcp`) and streamable HTTP."""
