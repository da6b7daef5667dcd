"""Graph extraction of the claims pack's events: what memory search (`memory query`, `checkout`) finds.

`register` (entry point `eventloom.graph_extractors`) gives every claims event type its extractor, so the
graph, keyword and vector projectors of every node make observations and claims searchable memory.

- An observation is an entity `claims_observation` named by its key (`<session>/<seq>`), its summary what
  was seen where and when ("observation from chat at ...: Alice lives in Paris."): it `mentions` each
  entity extraction found, and each triple it states relates two entities (`stated_by` the observation).
- A claim (or a Resolution) is an entity `claim` named by its key whose summary reads as a claim, never as
  a fact: "claim (confidence 0.70, by agent:x, basis: 2 events): Alice LIVES_IN Paris". Its properties
  mark it `asserted_as` `claim` with `claimed_by` and `confidence` (`readmodels.retrieval.hits.ASSERTED_AS`),
  so retrieval answers it as a proposal with who claimed it, and the checkout shows it as "CLAIMED by ..."
  in its not-authoritative section. It is `about` its subject and `rests_on` each basis.
- A Resolution invalidates the claims it settles that are in its own session (the graph keeps entities per
  session): they stop holding when it is recorded, and a checkout lists them as no longer true.
- An acceptance marks a claim of its own session `accepted` (its review status); the derived edge it
  materialises lives in the claims read model.
"""

from __future__ import annotations

from typing import Any, Final

from gateway.packs.claims import events as ev
from gateway.packs.claims.model import event_key
from projectors.graph import Extraction, Extractor, clip, compact, register_extractor, typed
from readmodels.graph.model import EntityRef

CONTENT_CHARS: Final = 4000
OBSERVATION: Final = "claims_observation"
CLAIM: Final = "claim"
ENTITY: Final = "entity"


def claim_statement(p: ev.ClaimAsserted) -> str:
    """`Alice LIVES_IN Paris`, or `Alice NOT LIVES_IN Paris` for a negated claim."""
    relation = f"NOT {p.predicate}" if p.negated else p.predicate
    return f"{p.subject} {relation} {p.object}"


def claim_summary(p: ev.ClaimAsserted) -> str:
    """What memory search reads for a claim: who claims it, how sure, on how much, then what."""
    kind = "resolution" if isinstance(p, ev.ClaimResolved) else "claim"
    count = len(p.basis)
    basis = f"{count} event" + ("" if count == 1 else "s")
    summary = (
        f"{kind} (confidence {p.confidence:.2f}, by {p.source_agent}, basis: {basis}): {claim_statement(p)}"
    )
    if isinstance(p, ev.ClaimResolved):
        settled = ", ".join(event_key(s.session, s.seq) for s in p.supersedes)
        summary += f"; settles {settled}" + (f" ({p.reason})" if p.reason else "")
    if p.statement:
        summary += f'; in its words: "{p.statement}"'
    return clip(summary, CONTENT_CHARS)


def _observed(x: Extraction, p: ev.ObservationRecorded) -> None:
    key = event_key(x.event.session, x.event.seq)
    seen_at = p.observed_at or x.event.ts
    summary = clip(f"observation from {p.source} at {seen_at}: {p.content}", CONTENT_CHARS)
    properties = {"source": p.source, "observed_at": seen_at, "extracted_by": p.extracted_by}
    me = x.entity(key, OBSERVATION, summary, compact(properties))
    for name in p.mentions or []:
        x.relation(me, EntityRef(name, ENTITY), "mentions")
    for triple in p.triples or []:
        x.relation(
            EntityRef(triple.subject, ENTITY),
            EntityRef(triple.object, ENTITY),
            triple.predicate.lower(),
            properties={"stated_by": key},
        )
    x.summary = f"observation {key} from {p.source}"


def _claimed(x: Extraction, p: ev.ClaimAsserted) -> None:
    key = event_key(x.event.session, x.event.seq)
    properties: dict[str, Any] = {
        "asserted_as": "claim",
        "claimed_by": p.source_agent,
        "confidence": p.confidence,
        "basis": [event_key(s.session, s.seq) for s in p.basis],
        "subject": p.subject,
        "predicate": p.predicate,
        "object": p.object,
        "negated": p.negated,
    }
    if isinstance(p, ev.ClaimResolved):
        properties["supersedes"] = [event_key(s.session, s.seq) for s in p.supersedes]
    me = x.entity(key, CLAIM, claim_summary(p), properties)
    x.relation(me, EntityRef(p.subject, ENTITY), "about")
    for basis in p.basis:
        if basis.session == x.event.session:
            x.relation(me, EntityRef(event_key(basis.session, basis.seq)), "rests_on")
    x.summary = f"claim {key} by {p.source_agent} (confidence {p.confidence:.2f}): {claim_statement(p)}"


def _resolved(x: Extraction, p: ev.ClaimResolved) -> None:
    _claimed(x, p)
    key = event_key(x.event.session, x.event.seq)
    for settled in p.supersedes:
        if settled.session == x.event.session:
            reason = f"superseded by resolution {key}" + (f": {p.reason}" if p.reason else "")
            x.invalidate_entity(event_key(settled.session, settled.seq), CLAIM, x.event.ts, reason)
    settles = ", ".join(event_key(s.session, s.seq) for s in p.supersedes)
    x.summary = f"resolution {key} by {p.source_agent} settles {settles}: {claim_statement(p)}"


def _accepted(x: Extraction, p: ev.ClaimAccepted) -> None:
    claim = event_key(p.claim.session, p.claim.seq)
    if p.claim.session == x.event.session:
        x.entity(claim, CLAIM, None, compact({"review_status": "accepted", "accepted_by": p.reviewer}))
    x.summary = f"claim {claim} accepted by {p.reviewer}" + (f": {p.reason}" if p.reason else "")


EXTRACTORS: Final[dict[str, Extractor]] = {
    "claims.observation.recorded": typed(ev.ObservationRecorded, _observed),
    "claims.claim.asserted": typed(ev.ClaimAsserted, _claimed),
    "claims.claim.resolved": typed(ev.ClaimResolved, _resolved),
    "claims.claim.accepted": typed(ev.ClaimAccepted, _accepted),
}
"""The extractor of every claims event type."""


def register() -> None:
    """Entry point `eventloom.graph_extractors`: make the graph projector read the pack's event types."""
    for event_type, extractor in EXTRACTORS.items():
        register_extractor(event_type, extractor)
