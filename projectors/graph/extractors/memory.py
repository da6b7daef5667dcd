"""Extraction of authoritative memory: asserted facts, invalidations, and consolidation (its own module)."""

from __future__ import annotations

from typing import Final

from eventloom.schemas.catalogue import MemoryFactAsserted, MemoryInvalidated
from projectors.graph.extraction import Extraction, Extractor, typed
from projectors.graph.extractors.consolidation import EXTRACTORS as CONSOLIDATION
from readmodels.graph.model import EntityRef, canonical_ts


def fact_asserted(x: Extraction, p: MemoryFactAsserted) -> None:
    valid_from = canonical_ts(p.valid_from) if p.valid_from else x.ts
    types = {entity.name: entity.entity_type for entity in p.entities}
    for entity in p.entities:
        x.entity(entity.name, entity.entity_type, entity.summary, entity.properties, valid_from=valid_from)
    for relation in p.relations:
        x.relation(
            EntityRef(relation.source, types.get(relation.source)),
            EntityRef(relation.target, types.get(relation.target)),
            relation.relation_type,
            properties=relation.properties,
            valid_from=valid_from,
        )
    parts = [f"{e.name} ({e.entity_type})" for e in p.entities]
    parts += [f"{r.source} -{r.relation_type}-> {r.target}" for r in p.relations]
    x.summary = "fact: " + "; ".join(parts)


def invalidated(x: Extraction, p: MemoryInvalidated) -> None:
    if p.entity is not None:
        x.invalidate_entity(p.entity.name, p.entity.entity_type, p.invalid_at, p.reason)
        x.summary = f"invalidated {p.entity.name} ({p.entity.entity_type})"
    if p.relation is not None:
        r = p.relation
        x.invalidate_relation(r.source, r.target, r.relation_type, p.invalid_at, p.reason)
        x.summary = f"invalidated {r.source} -{r.relation_type}-> {r.target}"
    if p.reason:
        x.summary += f": {p.reason}"


EXTRACTORS: Final[dict[str, Extractor]] = {
    "memory.fact.asserted": typed(MemoryFactAsserted, fact_asserted, thread=lambda p: p.source_thread),
    "memory.invalidated": typed(MemoryInvalidated, invalidated),
    **CONSOLIDATION,
}
