"""The questions the claims read model answers, and the shape of each answer (plain Structs on the wire).

Both stores implement `ClaimsReads`; `QUESTIONS` and `answer` route a named question (over NATS, from the
CLI, MCP or the Python client) to it. Every row carries `citation`, the `eventloom://` URI of the event
that wrote it, and `session`, so a front door can leave out what its caller may not see.

A claim is named by its key, `<session>/<seq>` (`model.event_key`), an entity by its name (any spelling
that normalises to the same `model.entity_key`).
"""

from __future__ import annotations

from typing import Any, Final, Protocol

import msgspec

from readmodels import ViewGraph, ViewRequest

MAX_LIMIT: Final = 1000
MAX_BASIS_DEPTH: Final = 20
VIEW_QUESTION: Final = "view"
"""Entry point `eventloom.graph_views` `claims`: the question the web view asks for this model's nodes.

Node ids `claims:<Label>:<key>` (a Resolution is `claims:Claim:<key>`, kind `resolution`); a node's label
is `model.claim_label` / `model.observation_label` / the entity's name, and `search` looks in it. What a
request lets through, and how nodes and edges look: `view_rows`; which nodes (focus, search, newest
first): `ladybug_view`. Placeholders are never shown."""


class ClaimView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A claim (or a Resolution, `kind` `resolution`) as concluded by `source_agent`: never an observed fact.

    `basis`: the keys it rests on; `missing_basis`: those not in the model (a placeholder);
    `superseded_by`: the Resolution that settled it; `accepted`: it materialised its derived edge."""

    key: str
    kind: str
    subject: str  # the subject entity's name
    subject_key: str
    predicate: str
    object: str
    confidence: float
    source_agent: str
    negated: bool = False
    statement: str | None = None
    asserted_at: str
    session: str
    basis: list[str] = msgspec.field(default_factory=list)
    missing_basis: list[str] = msgspec.field(default_factory=list)
    supersedes: list[str] = msgspec.field(default_factory=list)
    superseded_by: str | None = None
    accepted: bool = False
    citation: str


class ObservationView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    key: str
    content: str
    source: str
    observed_at: str
    session: str
    extracted_by: str
    mentions: list[str] = msgspec.field(default_factory=list)  # entity names
    citation: str


class RelationView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """An entity-to-entity edge: stated by an observation (`derived` false) or materialised by an accepted
    claim (`derived` true); `via` is that observation's or claim's key. `source` and `target` are the
    entities' names. A derived edge is cited to its claim (whichever came first, the claim or its
    acceptance), its time the acceptance's."""

    source: str
    relation: str
    target: str
    derived: bool
    via: str
    session: str
    citation: str


class EntityView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    key: str
    name: str
    relations: list[RelationView] = msgspec.field(default_factory=list)
    """Outgoing and incoming, ordered by relation, source name, target name, then `via` (as strings)."""


class BasisLink(msgspec.Struct, frozen=True, kw_only=True):
    """`claim` rests on `basis` (an observation's or a claim's key), `depth` steps below the root."""

    claim: str
    basis: str
    depth: int


class BasisChain(msgspec.Struct, frozen=True, kw_only=True):
    """A claim and everything under it down to observations (at most `MAX_BASIS_DEPTH` steps)."""

    root: ClaimView
    claims: list[ClaimView] = msgspec.field(default_factory=list)  # below the root, nearest first
    observations: list[ObservationView] = msgspec.field(default_factory=list)
    links: list[BasisLink] = msgspec.field(default_factory=list)
    missing: list[str] = msgspec.field(default_factory=list)  # basis keys the model has no node for


class ContradictionView(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Two claims the contradiction producer found incompatible; open while neither is superseded."""

    first: ClaimView
    second: ClaimView
    trust: float
    method: str
    edge_id: str
    session: str
    citation: str


class AboutQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Claims whose subject is `entity`: highest confidence first, then newest (`asserted_at`), then key
    ascending; without superseded ones unless `include_superseded`."""

    entity: str
    include_superseded: bool = False
    limit: int = 100


class ClaimQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    claim: str


class ContradictionsQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Open contradictions (neither claim superseded, both projected: a side still a placeholder is left
    out until it is), whose either side's subject is `entity`, or any; highest trust first, then in the
    order of the inferring events (session, seq). `first`/`second` as the inferred edge's source/target."""

    entity: str | None = None
    limit: int = 100


class EntityQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    entity: str


class ObservationsQuestion(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Observations that mention `entity`, newest first: by `observed_at`, then session and seq, all
    descending. `mentions` are the names as given (extracted ones, then the triples' ends)."""

    entity: str
    limit: int = 100


class ClaimsReads(Protocol):
    """What a claims store answers. `limit`s are checked by `answer` before a store sees them."""

    async def about(self, question: AboutQuestion) -> list[ClaimView]: ...

    async def claim(self, question: ClaimQuestion) -> ClaimView | None: ...

    async def basis(self, question: ClaimQuestion) -> BasisChain | None: ...

    async def contradictions(self, question: ContradictionsQuestion) -> list[ContradictionView]: ...

    async def entity(self, question: EntityQuestion) -> EntityView | None: ...

    async def observations(self, question: ObservationsQuestion) -> list[ObservationView]: ...

    async def view(self, question: ViewRequest) -> ViewGraph: ...


QUESTIONS: Final[dict[str, type[msgspec.Struct]]] = {
    "about": AboutQuestion,
    "claim": ClaimQuestion,
    "basis": ClaimQuestion,
    "contradictions": ContradictionsQuestion,
    "entity": EntityQuestion,
    "observations": ObservationsQuestion,
    VIEW_QUESTION: ViewRequest,
}


class InvalidQuestion(ValueError):
    """A question that cannot be answered as asked; the message names the field."""


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidQuestion(f"limit: must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


async def answer(reads: ClaimsReads, question: str, body: bytes) -> Any:
    """Decode `body` as the named question and ask `reads` (raises InvalidQuestion for a bad one)."""
    kind = QUESTIONS.get(question)
    if kind is None:
        raise InvalidQuestion(
            f"question: no claims question named {question!r} (known: {', '.join(QUESTIONS)})"
        )
    try:
        asked = msgspec.json.decode(body, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidQuestion(str(exc)) from None
    limit = getattr(asked, "limit", None)
    if isinstance(limit, int) and question != VIEW_QUESTION:
        check_limit(limit)
    method = getattr(reads, question)
    return await method(asked)
