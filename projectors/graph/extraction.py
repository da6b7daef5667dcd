"""The builder extraction functions use: one `Extraction` per event collects its spine summary and ops.

Every op it makes carries the event's provenance and starts at the event's `ts` unless told otherwise, so
an extraction function only says *what* the event means, never how it is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeAlias, TypeVar

import msgspec

from eventloom.errors import EventValidationError
from eventloom.event import Event
from eventloom.schemas.catalogue_common import Evidence
from eventloom.schemas.registry import current_payload, schema_for
from readmodels.graph.model import (
    EdgeRetraction,
    EntityAssertion,
    EntityInvalidation,
    EntityRef,
    EventProjection,
    GraphOp,
    ObservationKind,
    Provenance,
    RelationAssertion,
    RelationInvalidation,
    SourceCitation,
    SpineEvent,
    TaskObservation,
    canonical_ts,
)

P = TypeVar("P", bound=msgspec.Struct)
Extractor: TypeAlias = Callable[[Event], EventProjection]
SUMMARY_LENGTH = 200
NAME_LENGTH = 512


def clip(text: str, limit: int = SUMMARY_LENGTH) -> str:
    """`text` on one line, at most `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def compact(values: dict[str, Any]) -> dict[str, Any]:
    """`values` without its `None` entries (a `None` property would *remove* the key on reassertion)."""
    return {key: value for key, value in values.items() if value is not None}


class Extraction:
    """Collects what one event projects; `projection()` returns the result."""

    def __init__(self, event: Event, *, source_thread: str | None = None) -> None:
        self.event = event
        self.ts = event.ts
        self.summary = event.type
        self.ops: list[GraphOp] = []
        self.provenance = Provenance(
            event_seq=event.seq, event_hash=event.hash, event_type=event.type, source_thread=source_thread
        )

    def entity(
        self,
        name: str,
        entity_type: str,
        summary: str | None = None,
        properties: dict[str, Any] | None = None,
        *,
        valid_from: str | None = None,
    ) -> EntityRef:
        self.ops.append(
            EntityAssertion(
                name=name[:NAME_LENGTH],
                entity_type=entity_type,
                summary=summary,
                properties=properties or {},
                provenance=self.provenance,
                valid_from=valid_from or self.ts,
            )
        )
        return EntityRef(name[:NAME_LENGTH], entity_type)

    def relation(
        self,
        source: EntityRef,
        target: EntityRef,
        relation_type: str,
        *,
        properties: dict[str, Any] | None = None,
        valid_from: str | None = None,
        evidence: Iterable[Evidence] = (),
        **audit: Any,
    ) -> None:
        items = list(evidence)
        self.ops.append(
            RelationAssertion(
                source=source,
                target=target,
                relation_type=relation_type,
                properties=properties or {},
                provenance=self.provenance,
                valid_from=valid_from or self.ts,
                evidence_event_hashes=tuple(e.event_hash for e in items if e.event_hash is not None),
                evidence_event_seqs=tuple(e.event_seq for e in items if e.event_seq is not None),
                evidence_citations=tuple(e.citation for e in items if e.citation),
                evidence_quotes=tuple(e.quote for e in items if e.quote),
                **audit,
            )
        )

    def invalidate_entity(self, name: str, entity_type: str, invalid_at: str, reason: str | None) -> None:
        self.ops.append(
            EntityInvalidation(
                name=name[:NAME_LENGTH],
                entity_type=entity_type,
                invalid_at=canonical_ts(invalid_at),
                reason=reason,
                provenance=self.provenance,
            )
        )

    def invalidate_relation(
        self, source: str, target: str, relation_type: str, invalid_at: str, reason: str | None
    ) -> None:
        self.ops.append(
            RelationInvalidation(
                source=source,
                target=target,
                relation_type=relation_type,
                invalid_at=canonical_ts(invalid_at),
                reason=reason,
                provenance=self.provenance,
            )
        )

    def retract(
        self,
        *,
        edge_id: str | None,
        source: str | None,
        target: str | None,
        relation_type: str | None,
        reason: str | None,
    ) -> None:
        self.ops.append(
            EdgeRetraction(
                edge_id=edge_id,
                source=source,
                target=target,
                relation_type=relation_type,
                reason=reason,
                retracted_at=self.ts,
                provenance=self.provenance,
            )
        )

    def cite(
        self,
        path: str,
        *,
        line_start: int | None = None,
        line_end: int | None = None,
        checksum: str | None = None,
        text: str | None = None,
        by_event: bool = True,
        by: EntityRef | None = None,
    ) -> None:
        self.ops.append(
            SourceCitation(
                path=path,
                line_start=line_start,
                line_end=line_end,
                checksum=checksum,
                text=text,
                cited_by_event=by_event,
                cited_by=by,
                provenance=self.provenance,
            )
        )

    def observe(self, task_id: str | None, kind: ObservationKind) -> None:
        """A task observation, only when the event itself names its task (`task_id` or `taskId`)."""
        if task_id:
            self.ops.append(TaskObservation(task_id=task_id, kind=kind, provenance=self.provenance))

    def projection(self) -> EventProjection:
        event = self.event
        spine = SpineEvent(
            session=event.session,
            seq=event.seq,
            hash=event.hash,
            prev_hash=event.prev_hash,
            type=event.type,
            ts=event.ts,
            actor=event.actor,
            summary=clip(self.summary),
            caused_by=tuple(event.caused_by),
        )
        return EventProjection(event=spine, ops=tuple(self.ops))


def read_as(event: Event, schema: type[P]) -> P:
    """`event`'s payload as `schema`: in the current shape when `schema` is its type's current schema (so a
    design payload reads as the current one, `current_payload`), else converted strictly. Raises
    `msgspec.ValidationError` when it does not fit."""
    if schema_for(event.type) is schema:
        try:
            current = current_payload(event)
        except EventValidationError as exc:
            raise msgspec.ValidationError(str(exc)) from None
        if isinstance(current, schema):
            return current
    return msgspec.convert(event.payload, schema, strict=True)


def typed(
    schema: type[P],
    build: Callable[[Extraction, P], None],
    *,
    thread: Callable[[P], str | None] | None = None,
) -> Extractor:
    """An `Extractor` that decodes the payload into `schema`, then lets `build` describe the event."""

    def extractor(event: Event) -> EventProjection:
        payload = read_as(event, schema)
        extraction = Extraction(event, source_thread=thread(payload) if thread is not None else None)
        build(extraction, payload)
        return extraction.projection()

    extractor.__name__ = f"extract_{getattr(build, '__name__', 'event')}"
    return extractor
