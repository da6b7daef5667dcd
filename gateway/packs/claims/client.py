"""`ClaimsClient`: recording observations and claims, and asking the claims questions, from any process.

    async with await EventLog.open(settings, persistent=False) as log:
        claims = ClaimsClient(log)
        seen = await claims.observe("Alice lives in Paris.", source="chat", session="s1")
        said = await claims.claim("Alice", "lives in", "Paris", confidence=0.7, basis=[seen],
                                  agent="agent:x", session="s1")
        for row in await claims.about("Alice"):
            print(row.predicate, row.object, row.confidence, row.citation)

`observe` records what was seen (with the mentions and triples its extractor found); it never makes a
claim. `claim` and `resolve` are the front door of claims: every `basis` (and every claim a Resolution
`supersedes`) is checked against the log first (`citing`), a predicate written as words is normalised
("lives in" -> `LIVES_IN`), and a bad argument raises `EventValidationError` naming it (`basis[1]`,
`predicate`) with nothing appended. Each returns the `eventloom://` citation of the event it appended.

The reads go to `eventloom.q.claims.<question>` (answered by the node that runs the `claims` projector)
and come back as the view Structs of `reads`; they raise `MemoryUnavailableError` when no node runs it,
`QueryError` (naming the field) for a bad question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, TypeVar

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.log import EventLog
from eventloom.position import Position
from eventloom.schemas.catalogue_common import SourceEvent
from gateway.packs.claims.citing import BASIS_TYPES, CitedRef, cited_event, cited_sources, parse_ref
from gateway.packs.claims.events import CLAIM_TYPES, CLAIMS_EVENT_TYPES
from gateway.packs.claims.extract import DeterministicExtractor, TripleExtractor
from gateway.packs.claims.llm_extract import NamesEachExtraction
from gateway.packs.claims.model import event_key
from gateway.packs.claims.predicates import normalise_predicate
from gateway.packs.claims.reads import (
    AboutQuestion,
    BasisChain,
    ClaimQuestion,
    ClaimView,
    ContradictionsQuestion,
    ContradictionView,
    EntityQuestion,
    EntityView,
    ObservationsQuestion,
    ObservationView,
)
from readmodels.query.answers import ask
from readmodels.query.client import DEFAULT_TIMEOUT_S

PROJECTOR: Final = "claims"
_AT: Final = re.compile(r"(.*) - at `\$\.(.+)`", re.DOTALL)
T = TypeVar("T")


def payload_of(payload: msgspec.Struct) -> dict[str, Any]:
    """A payload Struct as event JSON, without the fields that are None."""
    values: dict[str, Any] = msgspec.to_builtins(payload)
    return {name: value for name, value in values.items() if value is not None}


def claim_key(claim: str) -> str:
    """The key `<session>/<seq>` of a claim named by its key or its citation."""
    session, seq, _ = parse_ref("claim", claim)
    return event_key(session, seq)


def predicate_arg(text: str) -> str:
    try:
        return normalise_predicate(text)
    except ValueError as exc:
        raise EventValidationError("predicate", str(exc)) from None


def confidence_arg(confidence: float) -> float:
    if isinstance(confidence, bool) or not 0.0 <= float(confidence) <= 1.0:
        raise EventValidationError("confidence", f"must be between 0 and 1, got {confidence!r}")
    return float(confidence)


class ClaimsClient:
    """Appends the pack's events through `log` and asks its questions over `log`'s NATS connection."""

    def __init__(
        self,
        log: EventLog,
        *,
        extractor: TripleExtractor | None = None,
        projector: str = PROJECTOR,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        after: Position | None = None,
    ) -> None:
        """With `after` (an append's position), every question is answered once the projector applied it."""
        self.log = log
        self.extractor: TripleExtractor = extractor or DeterministicExtractor()
        self.projector = projector
        self.timeout_s = timeout_s
        self.after = after

    async def observe(
        self,
        content: str,
        *,
        source: str,
        session: str,
        observed_at: str | None = None,
        actor: str | None = None,
        principal: str | None = None,
    ) -> str:
        """Record `content` as seen at `source` (`actor`: who records it, default `source`); its mentions and
        triples as the extractor finds them. Never a claim."""
        if isinstance(self.extractor, NamesEachExtraction):
            by, found = await self.extractor.extract_named(content)
        else:
            by, found = self.extractor.name, await self.extractor.extract(content)
        payload = _build(
            "claims.observation.recorded",
            content=content,
            source=source,
            observed_at=observed_at,
            mentions=found.mentions,
            triples=found.triples,
            extracted_by=by,
        )
        return (await self._append(session, actor or source, payload, principal)).citation

    async def claim(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        confidence: float,
        basis: Sequence[CitedRef],
        agent: str,
        session: str,
        negated: bool = False,
        statement: str | None = None,
        principal: str | None = None,
    ) -> str:
        """`agent` concludes `subject` `predicate` `object` with `confidence`, resting on `basis`
        (observations or claims, each checked against the log first)."""
        fields = _claim_fields(subject, predicate, object, confidence, agent, negated, statement)
        fields["basis"] = await cited_sources(self.log, "basis", basis, BASIS_TYPES)
        payload = _build("claims.claim.asserted", **fields)
        return (await self._append(session, agent, payload, principal)).citation

    async def resolve(
        self,
        subject: str,
        predicate: str,
        object: str,
        *,
        confidence: float,
        basis: Sequence[CitedRef],
        supersedes: Sequence[CitedRef],
        agent: str,
        session: str,
        negated: bool = False,
        statement: str | None = None,
        reason: str | None = None,
        principal: str | None = None,
    ) -> str:
        """A Resolution: a claim that settles the claims it `supersedes` (each checked to be a claim)."""
        fields = _claim_fields(subject, predicate, object, confidence, agent, negated, statement)
        fields["basis"] = await cited_sources(self.log, "basis", basis, BASIS_TYPES)
        fields["supersedes"] = await cited_sources(self.log, "supersedes", supersedes, CLAIM_TYPES)
        payload = _build("claims.claim.resolved", **fields, reason=reason)
        return (await self._append(session, agent, payload, principal)).citation

    async def accept(
        self,
        claim: CitedRef,
        reviewer: str,
        *,
        session: str,
        reason: str | None = None,
        principal: str | None = None,
    ) -> str:
        """`reviewer` accepts `claim`, so it materialises its derived edge."""
        event = await cited_event(self.log, "claim", claim, CLAIM_TYPES)
        cited = SourceEvent(session=event.session, seq=event.seq, hash=event.hash)
        payload = _build("claims.claim.accepted", claim=cited, reviewer=reviewer, reason=reason)
        return (await self._append(session, reviewer, payload, principal)).citation

    async def _append(
        self, session: str, actor: str, payload: tuple[str, msgspec.Struct], principal: str | None
    ) -> Event:
        event_type, body = payload
        return await self.log.append(session, event_type, actor, payload_of(body), principal=principal)

    async def about(
        self, entity: str, *, include_superseded: bool = False, limit: int = 100
    ) -> list[ClaimView]:
        question = AboutQuestion(entity=entity, include_superseded=include_superseded, limit=limit)
        return await self._ask("about", question, list[ClaimView])

    async def claim_view(self, claim: str) -> ClaimView | None:
        """The claim `claim` (its key `<session>/<seq>` or its citation)."""
        question = ClaimQuestion(claim=claim_key(claim))
        return await self._ask("claim", question, ClaimView | None)  # type: ignore[arg-type]

    async def basis(self, claim: str) -> BasisChain | None:
        """The chain under the claim `claim` (its key or its citation), down to observations."""
        question = ClaimQuestion(claim=claim_key(claim))
        return await self._ask("basis", question, BasisChain | None)  # type: ignore[arg-type]

    async def contradictions(self, entity: str | None = None, *, limit: int = 100) -> list[ContradictionView]:
        question = ContradictionsQuestion(entity=entity, limit=limit)
        return await self._ask("contradictions", question, list[ContradictionView])

    async def entity(self, name: str) -> EntityView | None:
        return await self._ask("entity", EntityQuestion(entity=name), EntityView | None)  # type: ignore[arg-type]

    async def observations(self, entity: str, *, limit: int = 100) -> list[ObservationView]:
        question = ObservationsQuestion(entity=entity, limit=limit)
        return await self._ask("observations", question, list[ObservationView])

    async def _ask(self, question: str, request: msgspec.Struct, answer: type[T]) -> T:
        result: Any = await ask(
            self.log.client, self.projector, question, request, timeout_s=self.timeout_s, after=self.after
        )
        return msgspec.convert(result, answer)


def _claim_fields(
    subject: str,
    predicate: str,
    object: str,
    confidence: float,
    agent: str,
    negated: bool,
    statement: str | None,
) -> dict[str, Any]:
    return {
        "subject": subject,
        "predicate": predicate_arg(predicate),
        "object": object,
        "confidence": confidence_arg(confidence),
        "source_agent": agent,
        "negated": negated,
        "statement": statement,
    }


def _build(event_type: str, **fields: Any) -> tuple[str, msgspec.Struct]:
    """The payload of `event_type`, checked against its schema: an error names the argument at fault."""
    values = msgspec.to_builtins({name: value for name, value in fields.items() if value is not None})
    try:
        return event_type, msgspec.convert(values, CLAIMS_EVENT_TYPES[event_type])
    except msgspec.ValidationError as exc:
        found = _AT.fullmatch(str(exc))  # "Expected `str` of length >= 1 - at `$.subject`"
        if found is not None:
            raise EventValidationError(found[2], found[1]) from None
        raise EventValidationError("payload", str(exc)) from None
