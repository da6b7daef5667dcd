"""Toolsets: which tools a caller sees and may call.

Every tool belongs to one toolset. `default` holds the few tools an agent needs for its memory work; the
others (`review`, `admin`, and one per plug-in pack, named after its `eventloom.mcp_tools` entry point) are
enabled by configuration: `EVENTLOOM_MCP_TOOLSETS` for the server (default `default`), and a token's own
`toolsets` (`eventloom tokens add --toolsets`), which replaces the server's for that token. `all` names
every toolset.

A caller never sees a tool it may not use: besides its toolsets, a tool that needs the admin role or
review rights (`needs`) is left out of the list of a caller without them, and refused if called.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from mcp.server.mcpserver import MCPServer

from gateway.access.tokens import Principal

DEFAULT_TOOLSET: Final = "default"
ALL_TOOLSETS: Final = "all"
BUILT_IN_TOOLSETS: Final = ("default", "review", "admin")
Right = Literal["admin", "review"]
_ATTRIBUTE: Final = "eventloom_toolsets"


@dataclass
class ToolCatalogue:
    """What the registered tools declared: each tool's toolset, and the rights a tool needs."""

    toolset_of: dict[str, str] = field(default_factory=dict)
    needs: dict[str, Right] = field(default_factory=dict)

    @property
    def toolsets(self) -> tuple[str, ...]:
        found = set(self.toolset_of.values())
        return tuple(name for name in BUILT_IN_TOOLSETS if name in found) + tuple(
            sorted(found - set(BUILT_IN_TOOLSETS))
        )

    def tools_of(self, toolset: str) -> list[str]:
        return [tool for tool, owner in self.toolset_of.items() if owner == toolset]


def catalogue_of(server: MCPServer) -> ToolCatalogue:
    catalogue: ToolCatalogue | None = getattr(server, _ATTRIBUTE, None)
    if catalogue is None:
        catalogue = ToolCatalogue()
        setattr(server, _ATTRIBUTE, catalogue)
    return catalogue


def in_toolset(server: MCPServer, toolset: str, *names: str) -> None:
    """Declare the toolset of these tools (a tool declared in none is in its plug-in's, or `default`)."""
    catalogue = catalogue_of(server)
    for name in names:
        catalogue.toolset_of[name] = toolset


def tools_need(server: MCPServer, right: Right, *names: str) -> None:
    """Declare that only a caller with `right` (the admin role, or review rights) may see and call these."""
    catalogue = catalogue_of(server)
    for name in names:
        catalogue.needs[name] = right


def parse_toolsets(text: str, known: Iterable[str], where: str) -> frozenset[str]:
    """`default,claims` (or `all`) as toolset names, refusing a name no tool declared."""
    known = tuple(known)
    names = {part.strip() for part in text.split(",") if part.strip()}
    if not names:
        raise ValueError(f"{where}: expected toolset names separated by commas, e.g. 'default,claims'")
    if ALL_TOOLSETS in names:
        return frozenset(known)
    if unknown := sorted(names - set(known)):
        raise ValueError(f"{where}: no toolset named {unknown[0]!r}; the toolsets are {', '.join(known)}")
    return frozenset(names)


@dataclass(frozen=True)
class ToolAccess:
    """Which tools a caller sees: those of its toolsets it has the rights for."""

    catalogue: ToolCatalogue
    server_toolsets: frozenset[str]

    def toolsets_for(self, principal: Principal) -> frozenset[str]:
        """The token's own toolsets replace the server's; a name no installed tool declares (a pack since
        uninstalled) is passed over, not fatal."""
        if principal.toolsets is None:
            return self.server_toolsets
        if ALL_TOOLSETS in principal.toolsets:
            return frozenset(self.catalogue.toolsets)
        return frozenset(principal.toolsets) & frozenset(self.catalogue.toolsets)

    def visible(self, principal: Principal) -> frozenset[str]:
        toolsets = self.toolsets_for(principal)
        return frozenset(
            tool
            for tool, toolset in self.catalogue.toolset_of.items()
            if toolset in toolsets and self.may_use(principal, tool)
        )

    def may_use(self, principal: Principal, tool: str) -> bool:
        right = self.catalogue.needs.get(tool)
        if right == "admin":
            return principal.role == "admin"
        if right == "review":
            return principal.reviewer
        return True

    def summary(self) -> Mapping[str, list[str]]:
        return {toolset: self.catalogue.tools_of(toolset) for toolset in self.catalogue.toolsets}
