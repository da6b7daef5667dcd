"""The claims questions as MCP tools, asked of a running node (`client.ClaimsClient`).

Each takes an optional `session`: with it, only rows of that session; without, rows of every session the
caller's token may touch. Either way a row is returned only when
the caller's token may touch its session, and the session of every claim or observation in it: a
contradiction between a visible and an invisible claim is left out, a basis chain loses the parts the token
may not see (`withheld` counts them). Every row carries `citation`, the `eventloom://` URI of its event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from gateway.access.backend import Backend
from gateway.mcp.arguments import SessionFilter
from gateway.mcp.caller import current_caller
from gateway.mcp.scope import answers_scoped_by_rows
from gateway.packs.claims.client import ClaimsClient
from gateway.packs.claims.reads import MAX_LIMIT, BasisChain, ContradictionView, EntityView

Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description="How many to return.")]
Entity = Annotated[
    str, Field(min_length=1, max_length=512, description="An entity, by any spelling of its name.")
]
ClaimKey = Annotated[
    str,
    Field(min_length=3, max_length=300, description="The claim: its key <session>/<seq> or its citation."),
]


def reads_of(backend: Backend) -> ClaimsClient:
    return ClaimsClient(backend.log, after=current_caller().last_write)


class Visible:
    """What the caller may see: sessions its token may touch, and (when asked) only `session`."""

    def __init__(self, session: str | None) -> None:
        self.principal = current_caller().principal
        self.session = session

    def may_see(self, *sessions: str) -> bool:
        return all(self.principal.may_touch(s) for s in sessions) and (
            self.session is None or self.session in sessions
        )

    def rows(self, rows: Iterable[Any]) -> list[Any]:
        return [plain(row) for row in rows if self.may_see(row.session)]

    def contradictions(self, rows: Iterable[ContradictionView]) -> list[Any]:
        return [plain(r) for r in rows if self.may_see(r.session, r.first.session, r.second.session)]

    def entity(self, entity: EntityView | None) -> Any:
        if entity is None:
            return None
        relations = [r for r in entity.relations if self.may_see(r.session)]
        return plain(msgspec.structs.replace(entity, relations=relations))

    def basis(self, chain: BasisChain | None) -> dict[str, Any]:
        if chain is None or not self.may_see(chain.root.session):
            return {"chain": None, "withheld": 0}
        allowed = self.principal.may_touch
        claims = [c for c in chain.claims if allowed(c.session)]
        observations = [o for o in chain.observations if allowed(o.session)]
        shown = {chain.root.key} | {c.key for c in claims} | {o.key for o in observations}
        links = [link for link in chain.links if link.claim in shown and link.basis in shown]
        missing = [key for key in chain.missing if allowed(key.split("/", 1)[0])]
        kept = msgspec.structs.replace(
            chain, claims=claims, observations=observations, links=links, missing=missing
        )
        withheld = sum(
            len(before) - len(after)
            for before, after in (
                (chain.claims, claims),
                (chain.observations, observations),
                (chain.missing, missing),
            )
        )
        return {"chain": plain(kept), "withheld": withheld}


def plain(answer: Any) -> Any:
    return msgspec.to_builtins(answer)


def register_read_tools(server: MCPServer, backend: Backend) -> None:
    """Claims about an entity, what one rests on, contradictions, observations."""
    answers_scoped_by_rows(
        server,
        "claims_about",
        "claims_basis",
        "claims_contradictions",
        "claims_observations",
        "claims_entity",
    )

    @server.tool()
    async def claims_about(
        entity: Entity, session: SessionFilter = None, include_superseded: bool = False, limit: Limit = 100
    ) -> dict[str, Any]:
        """What agents claim about `entity`: each claim with its confidence, the agent that made it and
        its basis, highest confidence first, then newest; without claims a resolution settled unless
        `include_superseded`. Claims are conclusions, not facts: check claims_contradictions."""
        visible = Visible(session)
        found = await reads_of(backend).about(entity, include_superseded=include_superseded, limit=limit)
        return {"entity": entity, "claims": visible.rows(found)}

    @server.tool()
    async def claims_basis(claim: ClaimKey, session: SessionFilter = None) -> dict[str, Any]:
        """What `claim` rests on: the claims under it, down to the observations it was concluded from,
        with the links between them. Unknown (or not visible to you): `chain` is null."""
        return Visible(session).basis(await reads_of(backend).basis(claim))

    @server.tool()
    async def claims_contradictions(
        entity: Entity | None = None, session: SessionFilter = None, limit: Limit = 100
    ) -> dict[str, Any]:
        """Open contradictions: pairs of claims that cannot both hold (same subject and relation,
        different objects, or one negating the other) and that no resolution settled yet, highest trust
        (the weaker claim's confidence) first; about `entity`, or any. Settle one with claims_resolve."""
        found = await reads_of(backend).contradictions(entity, limit=limit)
        return {"contradictions": Visible(session).contradictions(found)}

    @server.tool()
    async def claims_observations(
        entity: Entity, session: SessionFilter = None, limit: Limit = 100
    ) -> dict[str, Any]:
        """Observations that mention `entity`, newest first: what was seen, where and when."""
        found = await reads_of(backend).observations(entity, limit=limit)
        return {"entity": entity, "observations": Visible(session).rows(found)}

    @server.tool()
    async def claims_entity(entity: Entity, session: SessionFilter = None) -> dict[str, Any]:
        """An entity and its relations: those observations state and those accepted claims derived
        (`derived` true, `via` the claim). Unknown: `entity` is null."""
        return {"entity": Visible(session).entity(await reads_of(backend).entity(entity))}
