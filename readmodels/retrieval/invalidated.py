"""Events whose facts no longer hold: the same time rule for what was said as for what is known.

An entity with no version holding at the asked time is left out of the answer (`resolve`). The event that
asserted it would still be found by the keyword and vector lanes, and quoted as if it held. So an event
(or a source span it carries) whose every asserted entity no longer holds then is left out the same way,
and counted; and the invalidations that closed the entities the question names are returned, cited, so
that an answer can say "this stopped holding at T" instead of saying nothing. "Names" means found by a
lane that matches words (`relevant`): a vector lane finds something for any question, and an unrelated
invalidation would only take room in a prompt.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import msgspec

from readmodels.graph.identity import event_uid
from readmodels.graph.lookup import InvalidationRow, asserted_by, invalidations_of
from readmodels.retrieval.hits import event_citation
from readmodels.retrieval.lanes import ENTITY_PREFIX, Candidate
from readmodels.retrieval.model import Invalidation
from readmodels.retrieval.protocol import GraphReads
from readmodels.retrieval.resolve import resolve_entities

MAX_INVALIDATIONS: Final = 5


class NoLongerHolding(msgspec.Struct, frozen=True, kw_only=True):
    candidates: set[str]
    """Keys of event and source candidates whose every asserted entity no longer holds."""
    invalidations: list[Invalidation]


async def no_longer_holding(
    graph: GraphReads,
    candidates: Iterable[Candidate],
    excluded_entities: set[str],
    as_of: str | None,
    relevant: set[str],
) -> NoLongerHolding:
    """The event and source candidates to leave out at `as_of`, and the invalidations behind them and
    behind `excluded_entities` (entity candidate keys that hold no version then), for the candidates among
    `relevant` (keys found by a lane that matches words)."""
    by_event: dict[str, set[str]] = {}
    for candidate in candidates:
        doc = candidate.doc
        if doc is not None and not candidate.key.startswith(ENTITY_PREFIX):
            by_event.setdefault(event_uid(doc.session, doc.seq), set()).add(candidate.key)
    asserted = await graph.read(asserted_by(sorted(by_event)))
    keys = {key for found in asserted.values() for key in found}
    probes = [Candidate(key=ENTITY_PREFIX + key, score=0.0) for key in sorted(keys)]
    _, gone = await resolve_entities(graph, probes, as_of) if probes else ({}, set())
    stale: set[str] = set()
    named = {key for key in excluded_entities if key in relevant}
    for uid, found in asserted.items():
        if all(ENTITY_PREFIX + key in gone for key in found):
            stale |= by_event[uid]
            if by_event[uid] & relevant:
                named |= {ENTITY_PREFIX + key for key in found}
    closed = {key.removeprefix(ENTITY_PREFIX) for key in named}
    rows = await graph.read(invalidations_of(sorted(closed))) if closed else []
    return NoLongerHolding(candidates=stale, invalidations=_latest_per_entity(rows, as_of))


def _latest_per_entity(rows: list[InvalidationRow], as_of: str | None) -> list[Invalidation]:
    """The last invalidation of each entity up to `as_of`, newest first."""
    latest: dict[str, InvalidationRow] = {}
    for row in rows:
        if as_of is None or row.invalid_at <= as_of:
            latest[row.key] = row  # rows come oldest first
    newest = sorted(latest.values(), key=lambda r: (r.invalid_at, r.key), reverse=True)
    return [_invalidation(row) for row in newest[:MAX_INVALIDATIONS]]


def _invalidation(row: InvalidationRow) -> Invalidation:
    return Invalidation(
        entity=row.name,
        type=row.entity_type,
        session=row.session,
        invalid_at=row.invalid_at,
        statement=row.summary or f"invalidated {row.name} ({row.entity_type})",
        citation=event_citation(row.session, row.seq, row.hash),
    )
