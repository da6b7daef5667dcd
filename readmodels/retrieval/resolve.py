"""Entities at the asked time: which version of each candidate entity held then, and how many came before.

A document found by the keyword or vector lane is one assertion of an entity, possibly an old one: the
answer is the entity as it stood at `as_of` (now, by default), never the superseded text. An entity with
no version holding then (invalidated, or not yet asserted) is left out and counted.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from readmodels.graph.identity import entity_key
from readmodels.graph.lookup import versions_by_key
from readmodels.graph.records import EntityVersion
from readmodels.retrieval.lanes import Candidate
from readmodels.retrieval.protocol import GraphReads

ENTITY_PREFIX = "entity:"


class Resolved(msgspec.Struct, frozen=True, kw_only=True):
    version: EntityVersion
    superseded: int
    """Versions of the entity before this one (they stopped holding by the asked time)."""


def holds_at(version: EntityVersion, as_of: str | None) -> bool:
    if as_of is None:
        return version.valid_to is None
    return version.valid_from <= as_of and (version.valid_to is None or version.valid_to > as_of)


def pick(versions: list[EntityVersion], as_of: str | None) -> Resolved | None:
    """The version holding at `as_of` among one entity's versions (oldest first), if any."""
    for index, version in enumerate(versions):
        if holds_at(version, as_of):
            return Resolved(version=version, superseded=index)
    return None


async def resolve_entities(
    graph: GraphReads, candidates: Iterable[Candidate], as_of: str | None
) -> tuple[dict[str, Resolved], set[str]]:
    """(resolved entity per candidate key, keys with no version holding at `as_of`)."""
    known: dict[str, list[EntityVersion]] = {}
    wanted: set[str] = set()
    for candidate in candidates:
        if not candidate.key.startswith(ENTITY_PREFIX):
            continue
        wanted.add(candidate.key)
        if candidate.version is not None:  # the exact lane read every version already
            versions = known.setdefault(candidate.key, [])
            if candidate.version not in versions:
                versions.append(candidate.version)
    missing = sorted(key.removeprefix(ENTITY_PREFIX) for key in wanted - set(known))
    for version in await graph.read(versions_by_key(missing)):
        known.setdefault(ENTITY_PREFIX + version_key(version), []).append(version)
    resolved: dict[str, Resolved] = {}
    for key in wanted:
        chosen = pick(sorted(known.get(key, []), key=lambda v: v.valid_from), as_of)
        if chosen is not None:
            resolved[key] = chosen
    return resolved, wanted - set(resolved)


def version_key(version: EntityVersion) -> str:
    return entity_key(version.session, version.name, version.entity_type)
